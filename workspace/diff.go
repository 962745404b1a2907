package workspace

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Diff writes the thread's change against its base to w: a stat, then
// the patch (without it when statOnly). It reads a cloud thread's head
// from this machine's mirror, fetching it if missing.
func (m *Manager) Diff(ctx context.Context, ws Workspace, w io.Writer, statOnly bool) error {
	src, err := m.threadSource(ctx, ws)
	if err != nil {
		return err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--stat"}
	if !statOnly {
		args = append(args, "--patch")
	}
	if err := m.runTo(ctx, src.dir, nil, w, append(args, ws.Base, ws.Head, "--")...); err != nil {
		return fail("diff the thread", err)
	}
	return nil
}

// Changes sums the thread's change against its base.
func (m *Manager) Changes(ctx context.Context, ws Workspace) (Changes, error) {
	src, err := m.threadSource(ctx, ws)
	if err != nil {
		return Changes{}, err
	}
	return m.changes(ctx, src.dir, ws.Base, ws.Head)
}

// threadSource is ws's repository, holding its base and head.
func (m *Manager) threadSource(ctx context.Context, ws Workspace) (source, error) {
	src, err := m.source(ctx, ws)
	if err != nil {
		return src, err
	}
	if err := m.ensure(ctx, src, ws.Head, "the thread's head"); err != nil {
		return src, err
	}
	return src, m.ensure(ctx, src, ws.Base, "the thread's base")
}

// Checkout makes branch name (ws.Branch when "") in the user's repository
// at dir point at the thread's head and switches dir's checkout to it, as
// `gh pr checkout` does: for review and merge. The head is fetched from
// the thread's repository when dir lacks it. An existing branch is only
// fast-forwarded; one that is not behind the head is ErrBranchExists.
func (m *Manager) Checkout(ctx context.Context, dir string, ws Workspace, name string) (string, error) {
	if name == "" {
		name = ws.Branch
	}
	if err := m.ValidBranch(ctx, name); err != nil {
		return "", err
	}
	user, err := m.source(ctx, Workspace{Repo: dir})
	if err != nil {
		return "", err
	}
	if !m.has(ctx, user.dir, ws.Head) {
		if _, err := m.run(ctx, user.dir, nil, "fetch", "--quiet", "--no-tags", "--", ws.Repo, "refs/heads/"+ws.Branch); err != nil {
			return "", remoteErr("fetch from", ws.Repo, err)
		}
		if !m.has(ctx, user.dir, ws.Head) {
			return "", wsErr(ErrUnknownRev, fmt.Sprintf("the thread's head %s is not on branch %q of %s", short(ws.Head), ws.Branch, ws.Repo))
		}
	}
	ref := "refs/heads/" + name
	have := m.resolve(ctx, user.dir, ref)
	cur, _ := m.run(ctx, user.dir, nil, "symbolic-ref", "--quiet", "HEAD")
	current := strings.TrimSpace(cur) == ref
	if have != "" && have != ws.Head {
		if _, err := m.run(ctx, user.dir, nil, "merge-base", "--is-ancestor", have, ws.Head); err != nil {
			return "", wsErr(ErrBranchExists, fmt.Sprintf("branch %q exists in %s and is not behind the thread's head %s; name another branch", name, user.dir, short(ws.Head)))
		}
	}
	switch {
	case current && have != ws.Head:
		_, err = m.run(ctx, user.dir, nil, "merge", "--quiet", "--ff-only", ws.Head)
	case current:
	case have == "":
		_, err = m.run(ctx, user.dir, nil, "switch", "--quiet", "-c", name, ws.Head)
	default:
		if _, err = m.run(ctx, user.dir, nil, "update-ref", ref, ws.Head, have); err == nil {
			_, err = m.run(ctx, user.dir, nil, "switch", "--quiet", name)
		}
	}
	if err != nil {
		return "", fail(fmt.Sprintf("check out branch %q in %s", name, user.dir), err)
	}
	return name, nil
}
