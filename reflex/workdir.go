package reflex

import (
	"context"
	"errors"

	"github.com/nerve-agents/nerve/workspace"
)

// Where a turn works (NERVE_WORKDIR): its worktree when its thread has a
// workspace, else the workdir its thread was started in, else a scratch
// directory; never NERVE_HOME.

// Scratch makes the private directory of a turn that has neither a
// workdir nor a workspace; workspace.Scratch is one. step 0 is the
// thread's own directory, reused by its turns.
type Scratch interface {
	Dir(key string, step int) (string, error)
}

// open prepares the turn's worktree. A cloud thread whose head is still
// its base may not have its branch on the remote yet (Khala gives the
// thread its number, so no one could create it before): it is created
// first, and a branch already there is the usual case after the first
// turn.
func (x *Executor) open(ctx context.Context, wt *workspace.Turn) (*workspace.Tree, error) {
	if x.deps.Workspaces == nil {
		return nil, errors.New("this daemon has no workspaces")
	}
	t := *wt
	if t.Cloud && (t.Head == "" || t.Head == t.Base) {
		ws, err := x.deps.Workspaces.Start(ctx, t.Workspace)
		switch {
		case err == nil:
			t.Base, t.Head = ws.Base, ws.Head
		case errors.Is(err, workspace.ErrBranchExists):
			t.Head = t.Base
		default:
			return nil, err
		}
	}
	return x.deps.Workspaces.Open(ctx, t)
}

// scratch makes the turn's scratch directory: its thread's, or its own.
func (x *Executor) scratch(t *Turn) (string, error) {
	if x.deps.Scratch == nil {
		return "", errors.New("the turn has no workdir and this daemon no scratch directories")
	}
	step := 0
	if t.OwnScratch {
		step = t.Step
	}
	return x.deps.Scratch.Dir(t.Key, step)
}
