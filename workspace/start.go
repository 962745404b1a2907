package workspace

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Start begins a thread's workspace: Resolve, then a local thread's branch
// is created at the base (a cloud thread's is made by its first push,
// ownbranch.go). The result has Base and Head set to that commit; the
// thread records it.
func (m *Manager) Start(ctx context.Context, ws Workspace) (Workspace, error) {
	src, ws, err := m.resolveBase(ctx, ws)
	if err != nil {
		return ws, err
	}
	if src.cloud {
		ws.Head = ws.Base
		return ws, nil
	}
	if err := m.moveBranch(ctx, src, ws.Branch, ws.Base, ""); err != nil {
		if errors.Is(err, ErrBranchMoved) || errors.Is(err, ErrPushRefused) {
			return ws, branchExists(ws.Branch, src.repo)
		}
		return ws, err
	}
	ws.Head = ws.Base
	return ws, nil
}

// Resolve checks a thread's workspace before the thread exists, without
// creating anything: ws.Branch must be a valid branch name that does not
// exist, and ws.Base ("" is the repository's HEAD) becomes the commit it
// names, which a cloud thread's remote must have. A cloud thread whose
// number Khala gives can Resolve first and leave the branch to its first
// turn (Head ""), whose push creates it.
func (m *Manager) Resolve(ctx context.Context, ws Workspace) (Workspace, error) {
	_, ws, err := m.resolveBase(ctx, ws)
	return ws, err
}

func (m *Manager) resolveBase(ctx context.Context, ws Workspace) (source, Workspace, error) {
	if err := m.ValidBranch(ctx, ws.Branch); err != nil {
		return source{}, ws, err
	}
	src, err := m.source(ctx, ws)
	if err != nil {
		return src, ws, err
	}
	if !src.fresh {
		if err := m.fetch(ctx, src); err != nil {
			return src, ws, err
		}
	}
	rev := ws.Base
	if rev == "" {
		rev = "HEAD"
	}
	base := m.resolve(ctx, src.dir, rev)
	if base == "" {
		if src.cloud {
			return src, ws, wsErr(ErrUnknownRev, fmt.Sprintf("base %q is not in %s; push it first", rev, src.repo))
		}
		return src, ws, wsErr(ErrUnknownRev, fmt.Sprintf("base %q is not a revision of %s", rev, src.repo))
	}
	if m.resolve(ctx, src.dir, "refs/heads/"+ws.Branch) != "" {
		return src, ws, branchExists(ws.Branch, src.repo)
	}
	ws.Base = base
	return src, ws, nil
}

// Branches lists the branches of ws's repository whose names begin with
// prefix: for a cloud thread, what its remote had when this machine's
// mirror was last fetched (Resolve fetches it).
func (m *Manager) Branches(ctx context.Context, ws Workspace, prefix string) ([]string, error) {
	src, err := m.source(ctx, ws)
	if err != nil {
		return nil, err
	}
	out, err := m.run(ctx, src.dir, nil, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/"+path.Dir(prefix)+"/")
	if err != nil {
		return nil, fail("list the branches of "+src.repo, err)
	}
	var names []string
	for _, name := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names, nil
}

func branchExists(branch, repo string) error {
	return wsErr(ErrBranchExists, fmt.Sprintf("branch %q exists in %s; name another branch", branch, repo))
}

// moveBranch moves branch from old ("" = absent) to new: a compare-and-swap
// in a local repository, a push with a lease on old to a remote. It never
// forces: a branch that is no longer at old is ErrBranchMoved (local) or
// ErrPushRefused (remote), and stays where it is.
//
// drop names refs a cloud push deletes in the same atomic push (the turn
// refs of merged parallel turns): all of it happens, or none.
func (m *Manager) moveBranch(ctx context.Context, src source, branch, new, old string, drop ...string) error {
	ref := "refs/heads/" + branch
	if !src.cloud {
		if _, err := m.run(ctx, src.dir, nil, "update-ref", "-m", "nerve: turn", ref, new, old); err != nil {
			if m.resolve(ctx, src.dir, ref) == new {
				return nil // moved there already: publishing again is harmless
			}
			if old == "" {
				return wsErr(ErrBranchMoved, fmt.Sprintf("branch %q exists in %s already; commit %s is kept in the worktree", branch, src.repo, short(new)))
			}
			return wsErr(ErrBranchMoved, fmt.Sprintf("branch %q moved in %s while the turn ran (expected %s)", branch, src.repo, orNone(old)))
		}
		return nil
	}
	args := []string{"-c", "remote.origin.mirror=false", "push", "--quiet", "--no-verify"}
	if len(drop) > 0 {
		args = append(args, "--atomic")
	}
	// new "" deletes the branch (a first push undone): ":ref".
	args = append(args, "--force-with-lease="+ref+":"+old, "origin", new+":"+ref)
	for _, r := range drop {
		args = append(args, ":"+r)
	}
	_, err := m.run(ctx, src.dir, nil, args...)
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && isRefusal(ge.stderr) {
			if old == "" {
				return wsErr(ErrPushRefused, fmt.Sprintf("push of branch %q to %s refused: the branch exists there already; commit %s is kept in this machine's mirror",
					branch, src.repo, short(new)))
			}
			return wsErr(ErrPushRefused, fmt.Sprintf("push of branch %q to %s refused: the remote's branch is no longer at %s (another agent pushed); commit %s is kept in this machine's mirror",
				branch, src.repo, short(old), short(new)))
		}
		return remoteErr("push to", src.repo, err)
	}
	// The mirror now says what the remote says, without a fetch.
	if new == "" {
		_, _ = m.run(ctx, src.dir, nil, "update-ref", "-d", ref)
	} else {
		_, _ = m.run(ctx, src.dir, nil, "update-ref", ref, new)
	}
	return nil
}

// pushRef publishes commit to ref on the remote (a parallel turn's commit
// for Merge); the ref's name holds the commit, so it never needs a force.
func (m *Manager) pushRef(ctx context.Context, src source, ref, commit string) error {
	if !src.cloud {
		if _, err := m.run(ctx, src.dir, nil, "update-ref", ref, commit); err != nil {
			return fail("keep the turn's commit", err)
		}
		return nil
	}
	if _, err := m.run(ctx, src.dir, nil, "-c", "remote.origin.mirror=false", "push", "--quiet", "--no-verify",
		"origin", commit+":"+ref); err != nil {
		return remoteErr("push to", src.repo, err)
	}
	return nil
}

func isRefusal(stderr string) bool {
	for _, s := range []string{"[rejected]", "stale info", "non-fast-forward", "fetch first", "already exists"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

func orNone(sha string) string {
	if sha == "" {
		return "no commit"
	}
	return short(sha)
}
