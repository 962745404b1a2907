package workspace

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Checkout makes branch name (ws.Branch when "") in the user's repository
// at dir point at the thread's head and switches dir's checkout to it, as
// `gh pr checkout` does: for review and merge. The head is fetched from
// the thread's repository when dir lacks it. An existing branch is only
// fast-forwarded; one that is not behind the head is ErrBranchExists.
//
// dir must be the thread's repository (ErrOtherRepo otherwise, before
// anything is fetched into it): for a local thread the repository its
// workspace names (any of its worktrees), for a cloud thread a clone with
// a remote whose URL is the thread's shared remote. A checkout that would
// switch or move with uncommitted changes or untracked files in dir is
// ErrDirty: the user's work is never carried onto another branch.
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
	top := m.topLevel(ctx, user.dir)
	if err := m.threadRepo(ctx, top, ws); err != nil {
		return "", err
	}
	ref := "refs/heads/" + name
	have := m.resolve(ctx, user.dir, ref)
	cur, _ := m.run(ctx, user.dir, nil, "symbolic-ref", "--quiet", "HEAD")
	current := strings.TrimSpace(cur) == ref
	if !current || have != ws.Head {
		if err := m.clean(ctx, top); err != nil {
			return "", err
		}
	}
	if !m.has(ctx, user.dir, ws.Head) {
		if _, err := m.run(ctx, user.dir, nil, "fetch", "--quiet", "--no-tags", "--", ws.Repo, "refs/heads/"+ws.Branch); err != nil {
			return "", remoteErr("fetch from", ws.Repo, err)
		}
		if !m.has(ctx, user.dir, ws.Head) {
			return "", wsErr(ErrUnknownRev, fmt.Sprintf("the thread's head %s is not on branch %q of %s", short(ws.Head), ws.Branch, ws.Repo))
		}
	}
	if have != "" && have != ws.Head {
		if _, err := m.run(ctx, user.dir, nil, "merge-base", "--is-ancestor", "--end-of-options", have, ws.Head); err != nil {
			return "", wsErr(ErrBranchExists, fmt.Sprintf("branch %q exists in %s and is not behind the thread's head %s; name another branch", name, top, short(ws.Head)))
		}
	}
	switch {
	case current && have != ws.Head:
		_, err = m.run(ctx, user.dir, nil, "merge", "--quiet", "--ff-only", "--end-of-options", ws.Head)
	case current:
	case have == "":
		_, err = m.run(ctx, user.dir, nil, "switch", "--quiet", "-c", name, "--end-of-options", ws.Head)
	default:
		if _, err = m.run(ctx, user.dir, nil, "update-ref", ref, ws.Head, have); err == nil {
			_, err = m.run(ctx, user.dir, nil, "switch", "--quiet", name)
		}
	}
	if err != nil {
		return "", fail(fmt.Sprintf("check out branch %q in %s", name, top), err)
	}
	return name, nil
}

// topLevel is the top of dir's checkout, or dir when git cannot say.
func (m *Manager) topLevel(ctx context.Context, dir string) string {
	out, err := m.run(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if top := strings.TrimSpace(out); err == nil && top != "" {
		return top
	}
	return dir
}

// threadRepo refuses a repository at dir that is not ws's.
func (m *Manager) threadRepo(ctx context.Context, dir string, ws Workspace) error {
	if ws.Cloud {
		want := repoID(ws.Repo, "")
		names, _ := m.run(ctx, dir, nil, "remote")
		for _, n := range strings.Fields(names) {
			urls, _ := m.run(ctx, dir, nil, "remote", "get-url", "--all", n)
			for _, u := range strings.Fields(urls) {
				if repoID(u, dir) == want {
					return nil
				}
			}
		}
		return wsErr(ErrOtherRepo, fmt.Sprintf("%s is not a clone of the thread's repository %s (none of its remotes is it)", dir, ws.Repo))
	}
	mine, err := m.commonDir(ctx, dir)
	if err != nil {
		return err
	}
	theirs, err := m.commonDir(ctx, ws.Repo)
	if err != nil || mine != theirs {
		return wsErr(ErrOtherRepo, fmt.Sprintf("%s is not the thread's repository %s", dir, ws.Repo))
	}
	return nil
}

// commonDir is the git directory all of dir's worktrees share, as a real
// path: one repository has one, whichever checkout of it dir is.
func (m *Manager) commonDir(ctx context.Context, dir string) (string, error) {
	out, err := m.run(ctx, dir, nil, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", fail("read the git directory of "+dir, err)
	}
	cd := strings.TrimSpace(out)
	if !filepath.IsAbs(cd) {
		cd = filepath.Join(dir, cd)
	}
	return realPath(cd), nil
}

// clean refuses a checkout with uncommitted changes or untracked files
// (ignored files do not count), naming a few of them.
func (m *Manager) clean(ctx context.Context, dir string) error {
	out, err := m.run(ctx, dir, []string{"GIT_OPTIONAL_LOCKS=0"}, "status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return fail("read the status of "+dir, err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	var paths []string
	for _, l := range lines {
		if len(l) > 3 {
			paths = append(paths, l[3:])
		}
	}
	if len(paths) > maxItems {
		paths = append(paths[:maxItems], fmt.Sprintf("and %d more", len(paths)-maxItems))
	}
	return wsErr(ErrDirty, fmt.Sprintf("%s has uncommitted changes or untracked files (%s); nothing was switched", dir, strings.Join(paths, ", ")))
}

// scpLike is git's [user@]host:path form of an ssh URL.
var scpLike = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:[^@/]+@)?([^/:]+):(.*)$`) })

// repoID is what two URLs of one repository have in common: host and path
// without the user, the scheme (https, ssh, git), a trailing ".git" or
// "/"; a local path (or file:// URL) made absolute against dir and real.
// `git clone` of either name gives the same repository.
func repoID(repo, dir string) string {
	repo = strings.TrimSpace(repo)
	if u, err := url.Parse(repo); err == nil && strings.Contains(repo, "://") {
		if u.Scheme == "file" {
			return localID(u.Path, dir)
		}
		return strings.ToLower(u.Hostname()) + "/" + trimRepoPath(u.Path)
	}
	if g := scpLike().FindStringSubmatch(repo); g != nil && !strings.Contains(g[1], "/") {
		return strings.ToLower(g[1]) + "/" + trimRepoPath(g[2])
	}
	return localID(repo, dir)
}

func trimRepoPath(p string) string {
	p = strings.Trim(p, "/")
	return strings.TrimSuffix(strings.TrimSuffix(p, ".git"), "/")
}

func localID(p, dir string) string {
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	p, _ = filepath.Abs(p)
	p = strings.TrimSuffix(filepath.Clean(p), string(filepath.Separator)+".git")
	return "file:" + realPath(p)
}

// realPath is p with its symbolic links resolved, or p when it does not
// exist.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
