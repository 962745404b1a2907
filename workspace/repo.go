package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// source is the repository worktrees are added from: a local thread's
// own repository, or this machine's mirror of a cloud thread's remote.
type source struct {
	dir   string // where git runs: the repository's top level, or the mirror
	cloud bool
	fresh bool   // a mirror cloned just now: it has every commit the remote has
	repo  string // as given, for messages (redacted when shown)
}

// source finds ws's repository; for a cloud thread it makes the mirror if
// there is none yet (a first clone fetches everything once).
func (m *Manager) source(ctx context.Context, ws Workspace) (source, error) {
	if ws.Repo == "" {
		return source{}, wsErr(ErrNotRepo, "the workspace names no repository")
	}
	if ws.Cloud {
		dir, fresh, err := m.mirror(ctx, ws.Repo)
		return source{dir: dir, cloud: true, fresh: fresh, repo: ws.Repo}, err
	}
	dir, err := filepath.Abs(ws.Repo)
	if err != nil {
		return source{}, wsErr(ErrNotRepo, fmt.Sprintf("repo %q: %v", ws.Repo, err))
	}
	if _, err := os.Stat(dir); err != nil {
		return source{}, wsErr(ErrNotRepo, fmt.Sprintf("repo %s does not exist", dir))
	}
	if _, err := m.run(ctx, dir, nil, "rev-parse", "--git-dir"); err != nil {
		var ge *gitError
		if errors.As(err, &ge) {
			return source{}, wsErr(ErrNotRepo, fmt.Sprintf("repo %s is not a git repository", dir))
		}
		return source{}, err
	}
	return source{dir: dir, repo: dir}, nil
}

// sourceDir is where source would find ws's repository, without git.
func (m *Manager) sourceDir(ws Workspace) string {
	if ws.Cloud {
		return m.mirrorDir(ws.Repo)
	}
	dir, _ := filepath.Abs(ws.Repo)
	return dir
}

// mirrorDir is where the mirror of url lives: one per URL, whatever the
// credentials in it.
func (m *Manager) mirrorDir(url string) string {
	return filepath.Join(m.reposDir(), dirName(redact(url))+".git")
}

// mirror returns the mirror of url, cloning it first if absent. The clone
// goes to a temporary directory renamed into place, so a crash never
// leaves a half mirror where a later turn would look.
func (m *Manager) mirror(ctx context.Context, url string) (dir string, fresh bool, err error) {
	dir = m.mirrorDir(url)
	defer m.lock(dir)()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return dir, false, nil
	}
	if err := os.MkdirAll(m.reposDir(), 0o700); err != nil {
		return "", false, wsErr(ErrGit, fmt.Sprintf("create %s: %v", m.reposDir(), err))
	}
	tmp, err := os.MkdirTemp(m.reposDir(), ".clone-")
	if err != nil {
		return "", false, wsErr(ErrGit, fmt.Sprintf("create a mirror in %s: %v", m.reposDir(), err))
	}
	defer os.RemoveAll(tmp)
	if err := m.unanswered(url); err != nil {
		return "", false, err
	}
	if _, err := m.run(ctx, "", nil, "clone", "--mirror", "--quiet", "--", url, tmp); err != nil {
		return "", false, remoteErr("clone", url, m.noteUnanswered(url, err))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", false, wsErr(ErrGit, fmt.Sprintf("move the mirror of %s into place: %v", url, err))
	}
	return dir, true, nil
}

// fetch brings the mirror up to date with its remote (what changed only).
func (m *Manager) fetch(ctx context.Context, src source) error {
	if !src.cloud {
		return nil
	}
	defer m.lock(src.dir)()
	if err := m.unanswered(src.repo); err != nil {
		return err
	}
	if _, err := m.run(ctx, src.dir, nil, "fetch", "--quiet", "--prune", "origin"); err != nil {
		return remoteErr("fetch", src.repo, m.noteUnanswered(src.repo, err))
	}
	return nil
}

// remoteErr says why talking to the remote failed, without credentials.
func remoteErr(op, url string, err error) error {
	if isTimeout(err) {
		return wsErr(ErrTimeout, fmt.Sprintf("%s %s: %s", op, url, err))
	}
	var ge *gitError
	if !errors.As(err, &ge) {
		return fail(op+" "+url, err)
	}
	msg := reason(ge.stderr)
	low := strings.ToLower(ge.stderr)
	if strings.Contains(low, "does not appear to be a git repository") || strings.Contains(low, "not a git repository") ||
		(op == "clone" && (strings.Contains(low, "does not exist") || strings.Contains(low, "repository not found"))) {
		return wsErr(ErrNotRepo, fmt.Sprintf("repo %s is not a git repository", url))
	}
	return wsErr(ErrRemote, fmt.Sprintf("%s %s failed: %s", op, url, msg))
}

// has reports whether the repository at dir has commit rev.
func (m *Manager) has(ctx context.Context, dir, rev string) bool {
	if rev == "" {
		return false
	}
	_, err := m.run(ctx, dir, nil, "cat-file", "-e", "--end-of-options", rev+"^{commit}")
	return err == nil
}

// ensure makes sure the source has commit rev, fetching once if needed.
func (m *Manager) ensure(ctx context.Context, src source, rev, what string) error {
	if m.has(ctx, src.dir, rev) {
		return nil
	}
	if err := m.fetch(ctx, src); err != nil {
		return err
	}
	if !m.has(ctx, src.dir, rev) {
		return wsErr(ErrUnknownRev, fmt.Sprintf("%s %s is not in %s; push it first", what, short(rev), src.repo))
	}
	return nil
}

// resolve returns the commit rev names in dir, or "" if none.
func (m *Manager) resolve(ctx context.Context, dir, rev string) string {
	out, err := m.run(ctx, dir, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// ValidBranch returns nil if git accepts name as a branch name.
func (m *Manager) ValidBranch(ctx context.Context, name string) error {
	bad := wsErr(ErrBadBranch, fmt.Sprintf("branch name %q is not valid in git", name))
	if name == "" || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "@") {
		return bad
	}
	out, err := m.run(ctx, "", nil, "check-ref-format", "--branch", name)
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) {
			return bad
		}
		return err
	}
	if strings.TrimSpace(out) != name {
		return bad
	}
	return nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
