package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// The workspace commands copy their arguments and flags into their
// options: checked without a daemon, a remote or git.
func TestWorkspaceCommandFlags(t *testing.T) {
	io, _, _ := TestStreams()
	f := newFactory(io)

	var run *workflowRunOptions
	cmd := newCmdWorkflowRun(f, func(o *workflowRunOptions) error { run = o; return nil })
	cmd.SetArgs([]string{"origin/code-review", "--repo", "../r", "--base", "v1.2", "--branch", "try/x"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if run.Repo != "../r" || run.Base != "v1.2" || run.Branch != "try/x" || !run.workspaceFlags() {
		t.Fatalf("workflow run options: %+v", run)
	}

	var diff threadDiffOptions
	cmd = newCmdThreadDiff(f, func(o *threadDiffOptions) error { diff = *o; return nil })
	cmd.SetArgs([]string{"code-change#thread-3", "--stat"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := (threadDiffOptions{Ref: "code-change#thread-3", Stat: true}); diff != want {
		t.Fatalf("thread diff options: %+v", diff)
	}

	var co threadCheckoutOptions
	cmd = newCmdThreadCheckout(f, func(o *threadCheckoutOptions) error { co = *o; return nil })
	cmd.SetArgs([]string{"origin/code-review#thread-9", "--branch", "review/x", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := (threadCheckoutOptions{Ref: "origin/code-review#thread-9", Branch: "review/x", JSON: true}); co != want {
		t.Fatalf("thread checkout options: %+v", co)
	}

	var pr workspacePruneOptions
	cmd = newCmdWorkspacePrune(f, func(o *workspacePruneOptions) error { pr = *o; return nil })
	cmd.SetArgs([]string{"--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pr, workspacePruneOptions{JSON: true}) {
		t.Fatalf("workspace prune options: %+v", pr)
	}
}

// `thread diff` and `thread checkout` examples name threads of an example
// workflow that declares a workspace: a thread of one that does not has
// nothing to diff or check out.
func TestThreadReviewExamplesHaveWorkspaces(t *testing.T) {
	io, _, _ := TestStreams()
	f := newFactory(io)
	examples := newCmdThreadDiff(f, nil).Example + "\n" + newCmdThreadCheckout(f, nil).Example
	for _, line := range strings.Split(examples, "\n") {
		fields := strings.Fields(line)
		ref, err := workflow.ParseRef(fields[3]) // nerve thread diff|checkout REF
		if err != nil {
			t.Fatalf("example %q: %v", line, err)
		}
		def, err := workflow.LoadFile(repoFile(t, "examples/"+ref.Workflow+".yaml"))
		if err != nil || def.Workspace == nil {
			t.Errorf("example %q: examples/%s.yaml declares no workspace (%v)", line, ref.Workflow, err)
		}
	}
}
