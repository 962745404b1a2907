package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/workspace"
)

type threadCheckoutOptions struct {
	Ref    string
	Branch string
	JSON   bool
	// Dir is the repository to make the branch in (--repo): the current
	// directory when "".
	Dir string
}

func newCmdThreadCheckout(f *Factory, runF func(*threadCheckoutOptions) error) *cobra.Command {
	opts := &threadCheckoutOptions{}
	cmd := &cobra.Command{
		Use:   "checkout REF#THREAD",
		Short: "Make a local branch of a thread's head in this repository and switch to it",
		Long: `Make a branch of a thread's head in the git repository of the current
directory (or --repo) and switch to it, for review and merge (as 'gh pr
checkout' does). The branch is the thread's (nerve/WORKFLOW/thread-N) unless
--branch names another; a branch that exists is only fast-forwarded. A cloud
thread's commits are fetched from its repository.

The repository must be the thread's: for a local thread the one its
workspace names (or a worktree of it), for a cloud thread a clone with a
remote whose URL is the thread's shared repository. Any other is refused
before anything is fetched into it, and so is a checkout with uncommitted
changes or untracked files.`,
		Example: `  nerve thread checkout code-change#thread-3
  nerve thread checkout origin/code-change#thread-9 --branch review/retries
  nerve thread checkout origin/code-change#thread-9 --repo ~/src/service`,
		Args: exactArgs(1, "name the thread (REF#thread-N)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(opts)
			}
			return threadCheckoutRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Branch, "branch", "", "the local branch (default: the thread's branch)")
	cmd.Flags().StringVar(&opts.Dir, "repo", "", "the repository to make the branch in (default: the current directory's)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print {\"branch\", \"head\", \"dir\"}")
	return cmd
}

// checkoutResult is the --json shape of `thread checkout`.
type checkoutResult struct {
	Thread string `json:"thread"`
	Branch string `json:"branch"`
	Head   string `json:"head"`
	Dir    string `json:"dir"`
}

func threadCheckoutRun(ctx context.Context, f *Factory, opts *threadCheckoutOptions) error {
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return err
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	ref, t, ws, err := threadWorkspace(ctx, f, opts.Ref)
	if err != nil {
		return err
	}
	if !t.Ended() && ref.Remote == "" && (opts.Branch == "" || opts.Branch == ws.Branch) {
		// Its branch is in this machine's repository and moves with each
		// turn: checked out, it would move under the user's files.
		return usageErrorf("name another branch with --branch, or wait for the thread to end", "%s is running: its branch %s moves with each turn", ref, ws.Branch)
	}
	name, err := newWorkspaceManager(f).Checkout(ctx, dir, ws, opts.Branch)
	switch {
	case (errors.Is(err, workspace.ErrOtherRepo) || errors.Is(err, workspace.ErrNotRepo)) && ws.Cloud:
		return usageErrorf(fmt.Sprintf("cd into a clone of %s, or name one with --repo DIR", ws.Repo), "%s", err)
	case errors.Is(err, workspace.ErrOtherRepo), errors.Is(err, workspace.ErrNotRepo):
		return usageErrorf(fmt.Sprintf("cd %s, or name it with --repo %s", ws.Repo, ws.Repo), "%s", err)
	case errors.Is(err, workspace.ErrDirty):
		return usageErrorf("commit or stash them (git stash --include-untracked), then run it again", "%s", err)
	case err != nil:
		return workspaceUsage(err)
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(checkoutResult{Thread: ref.String(), Branch: name, Head: ws.Head, Dir: dir})
	}
	fmt.Fprintf(f.IO.ErrOut, "switched to branch %s at %s (%s)\n", name, shortCommit(ws.Head), ref)
	return nil
}
