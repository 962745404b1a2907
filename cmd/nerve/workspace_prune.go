package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

func newCmdWorkspace(f *Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "workspace", Short: "Manage this machine's thread worktrees, repository mirrors and scratch directories"}
	cmd.AddCommand(newCmdWorkspacePrune(f, nil))
	return cmd
}

type workspacePruneOptions struct {
	JSON bool
}

func newCmdWorkspacePrune(f *Factory, runF func(*workspacePruneOptions) error) *cobra.Command {
	opts := &workspacePruneOptions{}
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove the worktrees, mirrors and scratch directories that no live thread uses",
		Long: `Remove what a crash or an ended thread left: worktrees (NERVE_HOME/worktrees/)
and scratch directories of threads that are no longer live, and repository
mirrors (NERVE_HOME/repos/) that nothing uses. A scratch directory is where
a turn with neither a workspace nor a workdir works: outside NERVE_HOME, in
the user cache directory (~/.cache/nerve/scratch/ on Linux). Branches and
commits are never touched.

Live, and so kept, is conservatively:
  - a local thread the daemon says is running, and any thread the daemon
    runs a turn of now;
  - a cloud thread its remote says is running, or whose remote cannot be
    asked (unreachable): its next turn may come back to this machine;
  - a mirror a kept worktree uses, or of a repository that a workflow
    definition in the configured directories names.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return workspacePruneRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print {\"worktrees\": [...], \"mirrors\": [...], \"scratch\": [...]}: what was removed")
	return cmd
}

// pruneResult is the --json shape of `workspace prune`: what was removed.
type pruneResult struct {
	Worktrees []string `json:"worktrees"`
	Mirrors   []string `json:"mirrors"`
	Scratch   []string `json:"scratch"`
}

func workspacePruneRun(ctx context.Context, f *Factory, opts *workspacePruneOptions) error {
	if _, err := f.Config(); err != nil {
		return err
	}
	keep, err := liveWorkspaces(ctx, f)
	if err != nil {
		return err
	}
	p, err := newWorkspaceManager(f).Prune(ctx, keep)
	if err != nil {
		return workspaceUsage(err)
	}
	res := pruneResult{Worktrees: p.Worktrees, Mirrors: p.Mirrors, Scratch: p.Scratch}
	for _, l := range []*[]string{&res.Worktrees, &res.Mirrors, &res.Scratch} {
		if *l == nil {
			*l = []string{}
		}
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(res)
	}
	for _, d := range res.Worktrees {
		fmt.Fprintf(f.IO.Out, "removed worktree %s\n", d)
	}
	for _, d := range res.Mirrors {
		fmt.Fprintf(f.IO.Out, "removed mirror %s\n", d)
	}
	for _, d := range res.Scratch {
		fmt.Fprintf(f.IO.Out, "removed scratch directory %s\n", d)
	}
	if len(res.Worktrees)+len(res.Mirrors)+len(res.Scratch) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "nothing to prune")
	}
	return nil
}

// liveWorkspaces says what Prune keeps (see the command's help). The
// daemon is asked for its running threads and turns, each remote a kept
// worktree may belong to for that thread's status.
func liveWorkspaces(ctx context.Context, f *Factory) (workspace.Keep, error) {
	c, err := f.daemonClient(ctx)
	if err != nil {
		return workspace.Keep{}, err
	}
	live := map[string]bool{}
	running, err := c.Threads(ctx, "", workflow.StatusRunning, 0)
	if err != nil {
		return workspace.Keep{}, fmt.Errorf("list the daemon's running threads: %w", err)
	}
	for _, t := range running {
		live[t.ID] = true
		live[workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String()] = true
	}
	st, err := c.Status(ctx)
	if err != nil {
		return workspace.Keep{}, fmt.Errorf("read the daemon's status: %w", err)
	}
	for _, at := range st.ActiveTurns {
		live[at.Thread] = true
	}
	clients := map[string]*remote.Client{}
	asked := map[string]bool{}
	keepTree := func(key string) bool {
		if live[key] {
			return true
		}
		ref, ok := workspaceKeyRef(key)
		switch {
		case !ok:
			// A local thread's id not running here is done with, and so is
			// an older daemon's key of a cloud thread (this one never uses
			// it again); a key nerve cannot read is kept.
			return !localThreadID().MatchString(key) && !legacyCloudKey().MatchString(key)
		case ref.Remote == "":
			return live[ref.Thread] || live[ref.String()]
		case live[ref.String()]:
			return true
		}
		if v, ok := asked[ref.String()]; ok {
			return v
		}
		v := remoteThreadLive(ctx, f, clients, ref)
		asked[ref.String()] = v
		return v
	}
	repos := definedRepos(f)
	return workspace.Keep{Worktree: keepTree, Repo: func(url string) bool { return repos[url] }}, nil
}

// localThreadID is a local thread's worktree key: its id.
var localThreadID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^thread-[0-9]+$`) })

// legacyCloudKey is how daemons before the ref keys named a cloud
// thread's worktree: REMOTE--WORKFLOW--THREAD, which cannot be read back
// when a remote's name has "--" in it (remotes "o" and "o--x").
var legacyCloudKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9].*--.+--thread-[0-9]+$`) })

// workspaceKeyRef reads a worktree's thread key as a ref: the daemon keys
// a cloud thread's worktree by its full ref (origin/code-review#thread-7),
// which names one remote whatever the remotes' names.
func workspaceKeyRef(key string) (workflow.Ref, bool) {
	if !strings.Contains(key, "#") {
		return workflow.Ref{}, false
	}
	ref, err := workflow.ParseRef(key)
	return ref, err == nil && ref.Thread != ""
}

// remoteThreadLive reports whether ref names a cloud thread that is still
// running, or whose remote cannot say (then it is kept). A remote no
// longer configured or a thread the remote does not know is not live.
func remoteThreadLive(ctx context.Context, f *Factory, clients map[string]*remote.Client, ref workflow.Ref) bool {
	c, ok := clients[ref.Remote]
	if !ok {
		c, _ = remoteClient(f, ref.Remote)
		clients[ref.Remote] = c
	}
	if c == nil {
		return false
	}
	t, err := c.Thread(ctx, ref.Thread)
	var re *remote.Error
	if errors.As(err, &re) && re.Status == 404 {
		return false
	}
	if err != nil {
		return true
	}
	return !t.Ended()
}

// definedRepos are the repositories the configured workflow definitions
// name: their mirrors serve the next thread.
func definedRepos(f *Factory) map[string]bool {
	repos := map[string]bool{}
	dirs, err := workflowDirs(f)
	if err != nil {
		return repos
	}
	for _, e := range workflow.List(dirs) {
		if e.Def != nil && e.Def.Workspace != nil && e.Def.Workspace.Repo != "" {
			repos[e.Def.Workspace.Repo] = true
		}
	}
	return repos
}
