package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

type threadDiffOptions struct {
	Ref  string
	Stat bool
}

func newCmdThreadDiff(f *Factory, runF func(*threadDiffOptions) error) *cobra.Command {
	opts := &threadDiffOptions{}
	cmd := &cobra.Command{
		Use:   "diff REF#THREAD",
		Short: "Print a thread's change against its base: a stat, then the diff",
		Long: `Print what a thread with a workspace changed: the diff of its branch's head
against the commit it started from, a stat first. A cloud thread's commits
are read from this machine's mirror of its repository (fetched if need be).`,
		Example: `  nerve thread diff code-change#thread-3
  nerve thread diff origin/code-change#thread-9 --stat`,
		Args: exactArgs(1, "name the thread (REF#thread-N)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(opts)
			}
			return threadDiffRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Stat, "stat", false, "only the stat")
	return cmd
}

func threadDiffRun(ctx context.Context, f *Factory, opts *threadDiffOptions) error {
	_, _, ws, err := threadWorkspace(ctx, f, opts.Ref)
	if err != nil {
		return err
	}
	return workspaceUsage(newWorkspaceManager(f).Diff(ctx, ws, f.IO.Out, opts.Stat))
}

// threadWorkspace reads the workspace of the thread ref names, as the
// workspace package takes it; a thread without one is a usage error.
func threadWorkspace(ctx context.Context, f *Factory, s string) (workflow.Ref, *workflow.Thread, workspace.Workspace, error) {
	ref, err := workflow.ParseRef(s)
	if err != nil {
		return ref, nil, workspace.Workspace{}, err
	}
	if ref.Thread == "" {
		return ref, nil, workspace.Workspace{}, usageErrorf("'nerve workflow logs "+s+"' lists its threads", "%s names a workflow; name one of its threads (REF#thread-N)", s)
	}
	src, err := f.threadSource(ctx, ref)
	if err != nil {
		return ref, nil, workspace.Workspace{}, err
	}
	t, err := threadOf(ctx, src, ref)
	if err != nil {
		return ref, nil, workspace.Workspace{}, err
	}
	if t.Workspace == nil {
		return ref, nil, workspace.Workspace{}, usageErrorf("", "%s has no workspace: its workflow declares none", ref)
	}
	w := t.Workspace
	if w.Head == "" {
		return ref, nil, workspace.Workspace{}, &failedError{msg: ref.String() + " has no commit yet: its branch is made by its first turn"}
	}
	return ref, t, workspace.Workspace{Repo: w.Repo, Cloud: ref.Remote != "", Base: w.Base, Branch: w.Branch, Head: w.Head}, nil
}
