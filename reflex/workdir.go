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

// open prepares the turn's worktree. A cloud thread's branch is made by
// its first push (Khala gives the thread its number, so no one could make
// it before); Open refuses a branch the remote has before that.
func (x *Executor) open(ctx context.Context, wt *workspace.Turn) (*workspace.Tree, error) {
	if x.deps.Workspaces == nil {
		return nil, errors.New("this daemon has no workspaces")
	}
	return x.deps.Workspaces.Open(ctx, *wt)
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
