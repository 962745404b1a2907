package workspace

import (
	"context"
	"fmt"
)

// A cloud thread's branch is its own: it is created by the thread's first
// push, which expects no branch there, and only ever moved from the head
// the thread recorded. While the thread's head is still its base nothing
// of it was pushed, so a branch of its name on the shared remote is
// someone else's (the remote's main, another thread's): the turn fails
// before its agent runs, and a push never moves it.

// firstPush reports whether a cloud turn's publication would create its
// thread's branch: nothing of the thread was pushed yet.
func (w Workspace) firstPush() bool {
	return w.Cloud && (w.Head == "" || w.Head == w.Base)
}

// lease is the commit a push of w's branch expects on the remote: none
// for the first push, the thread's recorded head afterwards.
func (w Workspace) lease() string {
	if w.firstPush() {
		return ""
	}
	return w.Head
}

// checkOwnBranch refuses a cloud turn whose thread has pushed nothing yet
// when the shared remote has its branch already (src fetched now, unless
// it was cloned just now).
func (m *Manager) checkOwnBranch(ctx context.Context, src source, w Workspace) error {
	if !w.firstPush() {
		return nil
	}
	if !src.fresh {
		if err := m.fetch(ctx, src); err != nil {
			return err
		}
	}
	if at := m.resolve(ctx, src.dir, "refs/heads/"+w.Branch); at != "" {
		return wsErr(ErrBranchExists, fmt.Sprintf("branch %q exists in %s (at %s) and this thread did not create it: a thread's branch is made by its first push, so nothing is pushed to it",
			w.Branch, src.repo, short(at)))
	}
	return nil
}
