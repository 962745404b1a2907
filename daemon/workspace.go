package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// A local thread's workspace (DESIGN.md, Workspaces): its branch is made in
// the user's repository when the thread starts, each turn works in a
// worktree of it under NERVE_HOME/worktrees (reflex opens and finishes it),
// a parallel round is merged by the engine's Merge, and the worktrees go
// when the thread ends.

// workspaceRequest is the workspace a local thread starts with: the run's
// flags over the definition's, with the defaults filled in (repo: the
// workdir; relative paths against it). nil when neither asks for one.
func workspaceRequest(def *workflow.Definition, req StartRequest) (*workspace.Workspace, error) {
	if def.Workspace == nil && req.Workspace == nil {
		return nil, nil
	}
	var ws workspace.Workspace
	if def.Workspace != nil {
		ws.Repo, ws.Base = def.Workspace.Repo, def.Workspace.Base
	}
	if r := req.Workspace; r != nil {
		if r.Repo != "" {
			ws.Repo = r.Repo
		}
		if r.Base != "" {
			ws.Base = r.Base
		}
		ws.Branch = r.Branch
	}
	if ws.Repo == "" {
		ws.Repo = req.Workdir
	}
	if ws.Repo == "" {
		return nil, usage("the workspace names no repository and the run gave no workdir", "give one with --repo")
	}
	if !filepath.IsAbs(ws.Repo) {
		if req.Workdir == "" {
			return nil, usage(fmt.Sprintf("workspace repo %q is relative and the run gave no workdir", ws.Repo), "give an absolute --repo")
		}
		ws.Repo = filepath.Join(req.Workdir, ws.Repo)
	}
	if ws.Base != "" {
		if err := workflow.CheckRevision(ws.Base); err != nil {
			return nil, usage(fmt.Sprintf("workspace base %q %s", ws.Base, err), "")
		}
	}
	if ws.Branch != "" {
		if err := workflow.CheckBranch(ws.Branch); err != nil {
			return nil, usage(fmt.Sprintf("workspace branch %q is not a branch name git accepts: %s", ws.Branch, err), "name another with --branch")
		}
	}
	return &ws, nil
}

// startWorkspace makes thread t's branch (its id known, not yet stored):
// a bad repository, an unknown base, a branch that exists or no git is a
// usage error, and nothing is left behind.
func (r *runner) startWorkspace(ctx context.Context, t *workflow.Thread, ws workspace.Workspace) error {
	if ws.Branch == "" {
		ws.Branch = workspace.BranchName(t.Workflow, t.ID)
	}
	got, err := r.ws.Start(ctx, ws)
	if err != nil {
		hint := ""
		switch {
		case errors.Is(err, workspace.ErrBranchExists), errors.Is(err, workspace.ErrBadBranch):
			hint = "name another branch with --branch"
		case errors.Is(err, workspace.ErrUnknownRev):
			hint = "give a revision the repository has with --base"
		case errors.Is(err, workspace.ErrNotRepo):
			hint = "run it in a git repository or give one with --repo"
		case errors.Is(err, workspace.ErrNoGit):
			hint = "install git, or run a workflow without a workspace"
		}
		return usage("workspace: "+err.Error(), hint)
	}
	t.Workspace = &workflow.Workspace{Repo: got.Repo, Base: got.Base, Branch: got.Branch, Head: got.Head}
	return nil
}

// turnWorkspace is where a local thread's turn works: the thread's
// worktree, or its own for one of several parallel turns.
func turnWorkspace(t *workflow.Thread, key string, step int, parallel bool) *workspace.Turn {
	if t.Workspace == nil {
		return nil
	}
	w := t.Workspace
	return &workspace.Turn{Workspace: workspace.Workspace{Repo: w.Repo, Base: w.Base, Branch: w.Branch, Head: w.Head},
		Key: key, Step: step, Parallel: parallel}
}

// merge is the engine's MergeFunc for local threads: the round's commits
// into the thread branch in step order. A conflict is kind merge on the
// message whose merge failed (its files named); any other failure is kind
// workspace on the round's last message; the branch stays at the last
// clean merge either way.
func (r *runner) merge(ctx context.Context, t *workflow.Thread, round []workflow.Message) string {
	w := t.Workspace
	var turns []workspace.Parallel
	for _, m := range round {
		if m.Commit != "" && m.Error == nil {
			turns = append(turns, workspace.Parallel{Step: m.Step, Commit: m.Commit})
		}
	}
	if len(turns) == 0 {
		return ""
	}
	mt := workspace.Turn{Workspace: workspace.Workspace{Repo: w.Repo, Base: w.Base, Branch: w.Branch, Head: w.Head}, Key: t.ID}
	merged, err := r.ws.Merge(ctx, mt, r.d.config().Agent.Name, turns)
	if err == nil || ctx.Err() != nil {
		return merged.Commit
	}
	var we *workspace.Error
	i := len(round) - 1
	msg := err.Error()
	if errors.As(err, &we) && we.Kind == workspace.KindMerge {
		for k := range round {
			if round[k].Step == we.Step {
				i = k
			}
		}
		if len(we.Files) > 0 {
			msg = strings.Join(we.Files, ", ")
		}
	}
	round[i].Error = &workflow.MessageError{Kind: workspace.KindOf(err), Message: msg}
	r.d.log.Warn("merge parallel turns", "thread", t.ID, "step", round[i].Step, "err", err)
	return merged.Commit
}

// removeWorktrees deletes a thread's worktrees on this machine (its own
// and its parallel turns'); the branch and its commits stay.
func (r *runner) removeWorktrees(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.ws.Remove(ctx, key); err != nil {
		r.d.log.Warn("remove worktrees", "thread", key, "err", err)
	}
}

// gitDeadlines are nerve.yaml's bounds on git commands (workspace:).
func gitDeadlines(cfg *config.Config) workspace.Deadlines {
	w := cfg.Workspace
	return workspace.Deadlines{Fetch: time.Duration(w.FetchTimeout), Push: time.Duration(w.PushTimeout), Local: time.Duration(w.LocalTimeout)}
}
