package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPrune removes the worktrees and mirrors nothing refers to (and what
// a crash left: a directory without its record, an interrupted clone),
// keeps the rest, and leaves git's own worktree list consistent.
func TestPrune(t *testing.T) {
	repo := newRepo(t)
	remoteA, remoteB := newRemote(t), newRemote(t)
	m := newManager(t)
	open := func(w Workspace, key string) *Tree {
		t.Helper()
		ws, err := m.Start(bg, w)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := m.Open(bg, Turn{Workspace: ws, Key: key, Step: 1})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	live := open(Workspace{Repo: repo, Branch: "nerve/w/thread-1"}, "w#thread-1")
	ended := open(Workspace{Repo: repo, Branch: "nerve/w/thread-2"}, "w#thread-2")
	cloudLive := open(Workspace{Repo: remoteA, Cloud: true, Branch: "nerve/c/thread-1"}, "origin/c#thread-1")
	cloudEnded := open(Workspace{Repo: remoteB, Cloud: true, Branch: "nerve/c/thread-2"}, "origin/c#thread-2")
	stray := filepath.Join(m.Home, "worktrees", "stray")
	write(t, filepath.Join(stray, "f"), "x")
	os.MkdirAll(filepath.Join(m.Home, "repos", ".clone-123"), 0o700)

	keep := map[string]bool{"w#thread-1": true, "origin/c#thread-1": true}
	p, err := m.Prune(bg, Keep{Worktree: func(k string) bool { return keep[k] }})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{ended.Dir, cloudEnded.Dir, stray, m.mirrorDir(remoteB), filepath.Join(m.Home, "repos", ".clone-123")} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s survived the prune", gone)
		}
	}
	for _, kept := range []string{live.Dir, cloudLive.Dir, m.mirrorDir(remoteA)} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was pruned: %v", kept, err)
		}
	}
	if !slices.Contains(p.Worktrees, ended.Dir) || !slices.Equal(p.Mirrors, []string{m.mirrorDir(remoteB)}) {
		t.Errorf("report %+v", p)
	}
	list := gitT(t, repo, "worktree", "list", "--porcelain")
	if strings.Contains(list, ended.Dir) || !strings.Contains(list, live.Dir) {
		t.Errorf("git worktree list:\n%s", list)
	}
	// The branches stay: pruning removes checkouts, never work.
	gitT(t, repo, "rev-parse", "--verify", "nerve/w/thread-2")

	// A thread that ends here: Remove, then a prune keeping its repo.
	if err := m.Remove(bg, "origin/c#thread-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cloudLive.Dir); err == nil {
		t.Error("Remove left the worktree")
	}
	p, _ = m.Prune(bg, Keep{Worktree: func(k string) bool { return keep[k] }, Repo: func(url string) bool { return url == remoteA }})
	if _, err := os.Stat(m.mirrorDir(remoteA)); err != nil || len(p.Mirrors) != 0 {
		t.Errorf("the mirror of a live repo was pruned: %+v", p)
	}
	p, _ = m.Prune(bg, Keep{})
	if len(p.Mirrors) != 1 || len(p.Worktrees) != 1 {
		t.Errorf("prune of everything: %+v", p)
	}
	if list := gitT(t, repo, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("git still lists worktrees:\n%s", list)
	}
}
