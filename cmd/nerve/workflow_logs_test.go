package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// The log shows a thread's branch and head, and each message's commit and
// changes; a thread without a workspace shows neither.
func TestLogsShowWorkspace(t *testing.T) {
	head, base := strings.Repeat("ab", 20), strings.Repeat("cd", 20)
	io, out, _ := TestStreams()
	f := &Factory{IO: io}
	printWorkspace(f, &workflow.Thread{Workspace: &workflow.Workspace{Repo: "git@host:app.git", Base: base, Branch: "nerve/cr/thread-3", Head: head}})
	printWorkspace(f, &workflow.Thread{})
	for _, m := range []workflow.Message{
		{Content: "edited", Commit: head, Changes: &workflow.Changes{Files: 2, Insertions: 12, Deletions: 3}},
		{Content: "one", Commit: head, Changes: &workflow.Changes{Files: 1, Insertions: 1}},
		{Content: "looked", Changes: &workflow.Changes{}},
		{Content: "no workspace"},
	} {
		printMessage(f, m)
	}
	want := "branch nerve/cr/thread-3 at abababa (base cdcdcdc, git@host:app.git)\n" +
		"    edited\n    commit abababa  +12 -3 in 2 files\n" +
		"    one\n    commit abababa  +1 -0 in 1 file\n" +
		"    looked\n    no changes\n" +
		"    no workspace\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

// The --json shapes have the workspace keys, null when empty.
func TestJSONShapesHaveWorkspaceKeys(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{newMessageJSON(workflow.Message{Step: 1}), []string{`"commit":null`, `"changes":null`}},
		{newMessageJSON(workflow.Message{Commit: "abc", Changes: &workflow.Changes{Files: 1}}), []string{`"commit":"abc"`, `"changes":{"files":1,"insertions":0,"deletions":0}`}},
		{newThreadJSON("", &workflow.Thread{ID: "thread-1", Workflow: "w"}), []string{`"workspace":null`}},
		{newThreadJSON("", &workflow.Thread{ID: "thread-1", Workflow: "w", Workspace: &workflow.Workspace{Repo: "r", Base: "b", Branch: "nerve/w/thread-1", Head: "h"}}),
			[]string{`"workspace":{"repo":"r","base":"b","branch":"nerve/w/thread-1","head":"h"}`}},
	} {
		raw, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(raw), w) {
				t.Errorf("%s lacks %s", raw, w)
			}
		}
	}
}
