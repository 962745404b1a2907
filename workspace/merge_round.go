package workspace

import (
	"context"
	"fmt"
)

// MergeRound is Merge for a cloud thread's merge turn, which may run more
// than once: a daemon that died after pushing the merge and before its
// answer was recorded leaves the branch past the round's head, and the
// turn runs again (on another machine, or this one after a restart). The
// branch is fetched first; when it has moved to a commit that descends from
// t.Head, the merge resumes from there, where the commits already merged
// are no-ops, so the branch ends where the first run put it. A branch that
// moved anywhere else is ErrBranchMoved, and nothing is merged.
func (m *Manager) MergeRound(ctx context.Context, t Turn, author string, turns []Parallel) (Merged, error) {
	if t.Cloud && t.Head != "" {
		src, err := m.source(ctx, t.Workspace)
		if err != nil {
			return Merged{}, err
		}
		if !src.fresh {
			if err := m.fetch(ctx, src); err != nil {
				return Merged{}, err
			}
		}
		switch at := m.resolve(ctx, src.dir, "refs/heads/"+t.Branch); {
		case at == "" || at == t.Head:
		case t.firstPush() && !m.mergedAny(ctx, src.dir, at, turns):
			// The round's first push makes the branch: one there that
			// merged none of the round's commits is not this thread's.
			return Merged{}, wsErr(ErrBranchExists, fmt.Sprintf("branch %q exists in %s (at %s) and this thread did not create it: a thread's branch is made by its first push, so nothing was merged",
				t.Branch, src.repo, short(at)))
		case m.descends(ctx, src.dir, at, t.Head):
			t.Head = at
		default:
			return Merged{}, wsErr(ErrBranchMoved, fmt.Sprintf("branch %q in %s is at %s, which does not descend from the round's head %s; nothing was merged",
				t.Branch, src.repo, short(at), short(t.Head)))
		}
	}
	return m.Merge(ctx, t, author, turns)
}

// descends reports whether commit descends from (or is) ancestor in dir.
func (m *Manager) descends(ctx context.Context, dir, commit, ancestor string) bool {
	_, err := m.run(ctx, dir, nil, "merge-base", "--is-ancestor", "--end-of-options", ancestor, commit)
	return err == nil
}

// mergedAny reports whether commit has any of turns' commits in its
// history: a merge of this round got there.
func (m *Manager) mergedAny(ctx context.Context, dir, commit string, turns []Parallel) bool {
	for _, p := range turns {
		if m.descends(ctx, dir, commit, p.Commit) {
			return true
		}
	}
	return false
}
