package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// The workspace flags of `workflow run` (--repo, --base, --branch) are
// checked here, before anything is started, so a bad one is answered at
// once and in one line:
//
//   - a workflow that declares no workspace refuses them (exit 2): --repo
//     alone does not turn a workspace on, because the definition's
//     moderator and prompts are written for one or the other;
//   - a local thread's repository, base and branch, when a flag is given,
//     are resolved read-only in the user's repository (not a git
//     repository, an unknown base, a branch that exists or that git
//     refuses, no git) and the request goes to the daemon, which resolves
//     them again when it creates the branch (and alone checks a run without
//     flags: a plain run reads no definition and runs no git in the CLI);
//   - a cloud thread's base is resolved to a full commit id against the git
//     remote (through this NERVE_HOME's mirror under repos/) and refused,
//     with a hint to push, when the remote lacks it: Khala is given the
//     commit, never a revision each agent could read differently.

// workspaceFlags reports whether any workspace flag was given.
func (o *workflowRunOptions) workspaceFlags() bool {
	return o.Repo != "" || o.Base != "" || o.Branch != ""
}

// localWorkspace fills req.Workspace for a local thread from the flags,
// after checking them against the definition (when the CLI can read it)
// and the repository.
func localWorkspace(ctx context.Context, f *Factory, opts *workflowRunOptions, req *daemon.StartRequest) error {
	if !opts.workspaceFlags() {
		return nil // the daemon starts the definition's workspace, if any, and says what is wrong with it
	}
	def := localDefinition(f, req)
	if def != nil && def.Workspace == nil {
		return noWorkspace(def.Name)
	}
	ws := workspace.Workspace{Repo: opts.Repo, Base: opts.Base, Branch: opts.Branch}
	if ws.Repo != "" && !filepath.IsAbs(ws.Repo) {
		abs, err := filepath.Abs(ws.Repo)
		if err != nil {
			return usageErrorf("", "--repo %s: %v", ws.Repo, err)
		}
		ws.Repo = abs
	}
	if def != nil {
		if ws.Repo == "" {
			ws.Repo = def.Workspace.Repo
		}
		if ws.Base == "" {
			ws.Base = def.Workspace.Base
		}
	}
	switch {
	case ws.Repo == "":
		ws.Repo = req.Workdir
	case !filepath.IsAbs(ws.Repo) && req.Workdir != "":
		ws.Repo = filepath.Join(req.Workdir, ws.Repo) // as the daemon reads a definition's relative repo
	}
	if filepath.IsAbs(ws.Repo) {
		if err := checkWorkspace(ctx, f, ws, workflowName(def, req)); err != nil {
			return err
		}
	}
	req.Workspace = &daemon.WorkspaceRequest{Repo: opts.absRepo(), Base: opts.Base, Branch: opts.Branch}
	return nil
}

// absRepo is --repo made absolute against the current directory: the
// daemon does not run where the CLI does.
func (o *workflowRunOptions) absRepo() string {
	if o.Repo == "" || filepath.IsAbs(o.Repo) {
		return o.Repo
	}
	abs, _ := filepath.Abs(o.Repo)
	return abs
}

// localDefinition reads the definition a local run names, or nil when the
// CLI cannot (the daemon then reports why).
func localDefinition(f *Factory, req *daemon.StartRequest) *workflow.Definition {
	if req.File != "" {
		d, err := workflow.LoadFile(req.File)
		if err != nil {
			return nil
		}
		return d
	}
	dirs, err := workflowDirs(f)
	if err != nil {
		return nil
	}
	d, err := workflow.Find(dirs, req.Workflow)
	if err != nil {
		return nil
	}
	return d
}

func workflowName(def *workflow.Definition, req *daemon.StartRequest) string {
	if def != nil {
		return def.Name
	}
	return req.Workflow
}

// checkWorkspace resolves ws read-only, as the thread's start will: a
// branch is needed for the check, so an unnamed one is probed with a name
// no thread uses.
func checkWorkspace(ctx context.Context, f *Factory, ws workspace.Workspace, name string) error {
	m := newWorkspaceManager(f)
	if ws.Branch == "" {
		ws.Branch = workflow.DefaultBranch(name, "thread-check")
	}
	_, err := m.Resolve(ctx, ws)
	return runWorkspaceError(err)
}

// runWorkspaceError is a refused workspace of `workflow run`, with a hint
// naming the flag that fixes it.
func runWorkspaceError(err error) error {
	out := workspaceUsage(err)
	var ue *usageError
	if !errors.As(out, &ue) || ue.hint != "" {
		return out
	}
	switch {
	case errors.Is(err, workspace.ErrBranchExists), errors.Is(err, workspace.ErrBadBranch):
		ue.hint = "name another branch with --branch"
	case errors.Is(err, workspace.ErrUnknownRev):
		ue.hint = "give a revision the repository has with --base"
	case errors.Is(err, workspace.ErrNotRepo):
		ue.hint = "run it in a git repository or give one with --repo"
	}
	return ue
}

// cloudWorkspace gives a cloud thread its workspace: the definition's
// (read from the remote) overridden by the flags, its base resolved to a
// commit the git remote has.
func cloudWorkspace(ctx context.Context, f *Factory, c *remote.Client, opts *workflowRunOptions, name string) (*daemon.WorkspaceRequest, error) {
	w, err := c.Workflow(ctx, name)
	if err != nil {
		return nil, remoteUsage(err)
	}
	if w.Workspace == nil {
		if opts.workspaceFlags() {
			return nil, noWorkspace(c.Name + "/" + name)
		}
		return nil, nil
	}
	ws := workspace.Workspace{Cloud: true, Repo: w.Workspace.Repo, Base: w.Workspace.Base, Branch: opts.Branch}
	if opts.Repo != "" {
		ws.Repo = opts.Repo
		if _, err := os.Stat(ws.Repo); err == nil && !filepath.IsAbs(ws.Repo) {
			ws.Repo, _ = filepath.Abs(ws.Repo) // a shared disk's repository
		}
	}
	if opts.Base != "" {
		ws.Base = opts.Base
	}
	if ws.Repo == "" {
		return nil, usageErrorf("name the repository with --repo URL", "workflow %s/%s declares a workspace without a repo", c.Name, name)
	}
	if err := workflow.CheckSharedRepo(ws.Repo); err != nil {
		return nil, usageErrorf("", "--repo %s: %v", ws.Repo, err)
	}
	if ws.Branch != "" {
		if err := checkWorkspaceBranch(ctx, f, ws.Branch); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(ws.Branch, workflow.BranchNamespace) {
			return nil, usageErrorf("name one under "+workflow.BranchNamespace+", e.g. --branch "+workflow.BranchNamespace+ws.Branch,
				"--branch %s: a cloud thread's branch is under %s (its serving agents push it with their own credentials)", ws.Branch, workflow.BranchNamespace)
		}
	} else {
		ws.Branch = workflow.DefaultBranch(name, "thread-check")
	}
	m := newWorkspaceManager(f)
	got, err := m.Resolve(ctx, ws)
	if err != nil {
		return nil, runWorkspaceError(err)
	}
	req := &daemon.WorkspaceRequest{Repo: ws.Repo, Base: got.Base, Branch: opts.Branch}
	if opts.Branch == "" {
		req.Taken = takenBranches(ctx, m, ws, name)
	}
	return req, nil
}

// takenBranches are the default branches of workflow name the shared
// remote has already, as the mirror Resolve fetched says (a Khala started
// afresh on a repository another one used): Khala gives the thread the
// next free name instead of one its first push would find taken. A list
// git cannot give is none (the first push then says so).
func takenBranches(ctx context.Context, m *workspace.Manager, ws workspace.Workspace, name string) []string {
	taken, err := m.Branches(ctx, ws, workflow.DefaultBranch(name, "thread-"))
	if err != nil {
		return nil
	}
	if len(taken) > workflow.MaxTakenBranches {
		// The newest threads' names are the ones the next thread's can be.
		slices.SortFunc(taken, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
		taken = taken[len(taken)-workflow.MaxTakenBranches:]
	}
	return taken
}

// noteTakenBranch says, after a cloud thread started, that its default
// branch was taken on the shared remote and which one it has instead.
func noteTakenBranch(f *Factory, ws *daemon.WorkspaceRequest, ref workflow.Ref) {
	if ws == nil || ws.Branch != "" || len(ws.Taken) == 0 {
		return
	}
	def := workflow.DefaultBranch(ref.Workflow, ref.Thread)
	if got := workflow.FreeBranch(def, ws.Taken); got != def {
		fmt.Fprintf(f.IO.ErrOut, "branch %s exists on %s already: %s works on branch %s\n", def, ws.Repo, ref, got)
	}
}

func checkWorkspaceBranch(ctx context.Context, f *Factory, branch string) error {
	return runWorkspaceError(newWorkspaceManager(f).ValidBranch(ctx, branch))
}

// newWorkspaceManager runs git as the daemon does, with nerve.yaml's
// deadlines (the defaults when it cannot be read: the command reports
// that itself where it matters).
func newWorkspaceManager(f *Factory) *workspace.Manager {
	return &workspace.Manager{Home: config.Home(f.Getenv), Deadlines: func() workspace.Deadlines {
		cfg, err := f.Config()
		if err != nil {
			return workspace.Deadlines{}
		}
		w := cfg.Workspace
		return workspace.Deadlines{Fetch: time.Duration(w.FetchTimeout), Push: time.Duration(w.PushTimeout), Local: time.Duration(w.LocalTimeout)}
	}}
}

func noWorkspace(name string) error {
	return usageErrorf("drop --repo, --base and --branch, or declare 'workspace:' in the definition", "workflow %s declares no workspace", name)
}

// workspaceUsage makes a workspace refusal a usage error (exit 2) with a
// hint; a remote that cannot be reached stays a failure (exit 1).
func workspaceUsage(err error) error {
	if err == nil {
		return nil
	}
	var we *workspace.Error
	if !errors.As(err, &we) {
		return err
	}
	switch {
	case errors.Is(err, workspace.ErrNoGit):
		return usageErrorf("install git (https://git-scm.com) or put it on PATH", "%s", err)
	case errors.Is(err, workspace.ErrUnknownRev) && strings.Contains(we.Msg, "push it"):
		return usageErrorf("push the revision to the thread's repository (git push REMOTE REV), then run again", "%s", err)
	case errors.Is(err, workspace.ErrTimeout):
		return &failedError{msg: err.Error(), hint: "check that the repository answers (git ls-remote URL), or raise the deadline in nerve.yaml"}
	case errors.Is(err, workspace.ErrRemote), errors.Is(err, workspace.ErrGit):
		return &failedError{msg: err.Error()}
	}
	return usageErrorf("", "%s", err)
}

// workspaceLine is how a run's last lines show the thread's workspace.
func workspaceLine(ws *workflow.Workspace) string {
	if ws == nil {
		return ""
	}
	head := shortCommit(ws.Head)
	if head == "" {
		head = "(no commit yet)"
	}
	return fmt.Sprintf("workspace: branch %s at %s in %s", ws.Branch, head, ws.Repo)
}
