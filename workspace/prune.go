package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// Keep says what Prune must leave: worktrees and scratch directories of
// the thread keys Worktree accepts, and mirrors of the repositories Repo
// accepts (or that a kept worktree uses). A nil func keeps nothing of its
// kind.
type Keep struct {
	Worktree func(key string) bool
	Repo     func(url string) bool
}

// Pruned lists what Prune removed: worktree directories, mirrors and
// scratch directories.
type Pruned struct {
	Worktrees []string
	Mirrors   []string
	Scratch   []string
}

// Remove deletes the worktrees of thread key on this machine (its own and
// its parallel turns'): when the thread ends, or another machine took its
// next turn. The branch and its commits stay.
func (m *Manager) Remove(ctx context.Context, key string) error {
	for _, md := range m.trees() {
		if md.meta.Key == key {
			m.removeTree(ctx, md.dir, md.meta)
		}
	}
	return nil
}

// Prune removes what nothing refers to: worktrees and scratch directories
// whose thread keep does not name (and the leftovers of a crash: a
// directory without its record, an interrupted clone), then mirrors no
// kept worktree uses and keep does not name.
func (m *Manager) Prune(ctx context.Context, keep Keep) (Pruned, error) {
	p := Pruned{Scratch: Scratch{Home: m.Home}.Prune(keep.Worktree)}
	used := map[string]bool{}
	known := map[string]bool{}
	for _, t := range m.trees() {
		known[filepath.Base(t.dir)] = true
		if keep.Worktree != nil && keep.Worktree(t.meta.Key) {
			used[t.meta.Source] = true
			continue
		}
		m.removeTree(ctx, t.dir, t.meta)
		p.Worktrees = append(p.Worktrees, t.dir)
	}
	entries, _ := os.ReadDir(m.worktreesDir())
	for _, e := range entries {
		if e.IsDir() && !known[e.Name()] {
			dir := filepath.Join(m.worktreesDir(), e.Name())
			_ = os.RemoveAll(dir)
			p.Worktrees = append(p.Worktrees, dir)
		}
	}
	repos, _ := os.ReadDir(m.reposDir())
	for _, e := range repos {
		dir := filepath.Join(m.reposDir(), e.Name())
		if strings.HasPrefix(e.Name(), ".clone-") {
			_ = os.RemoveAll(dir)
			continue
		}
		if used[dir] {
			_, _ = m.run(ctx, dir, nil, "worktree", "prune")
			continue
		}
		url, _ := m.run(ctx, dir, nil, "config", "--get", "remote.origin.url")
		if keep.Repo != nil && keep.Repo(strings.TrimSpace(url)) {
			continue
		}
		unlock := m.lock(dir)
		_ = os.RemoveAll(dir)
		unlock()
		p.Mirrors = append(p.Mirrors, dir)
	}
	return p, nil
}

// CloudKeys lists the thread keys of the cloud threads' worktrees on this
// machine, from their records: what a daemon holds across its restarts,
// to remove when the thread ends or moves to another machine.
func (m *Manager) CloudKeys() []string {
	seen := map[string]bool{}
	var keys []string
	for _, t := range m.trees() {
		if t.meta.Cloud && !seen[t.meta.Key] {
			seen[t.meta.Key] = true
			keys = append(keys, t.meta.Key)
		}
	}
	return keys
}

type tree struct {
	dir  string
	meta *treeMeta
}

// trees lists the worktrees this Manager made, by their records.
func (m *Manager) trees() []tree {
	paths, _ := filepath.Glob(filepath.Join(m.worktreesDir(), "*.json"))
	var ts []tree
	for _, p := range paths {
		md, err := readMeta(p)
		if err != nil {
			_ = os.Remove(p)
			continue
		}
		ts = append(ts, tree{dir: strings.TrimSuffix(p, ".json"), meta: md})
	}
	return ts
}

// removeTree removes a worktree and git's record of it, even when the
// agent broke it or its repository is gone.
func (m *Manager) removeTree(ctx context.Context, dir string, md *treeMeta) {
	if md != nil && md.Source != "" {
		unlock := m.lock(md.Source)
		if _, err := m.run(ctx, md.Source, nil, "worktree", "remove", "--force", "--force", dir); err != nil {
			_ = os.RemoveAll(dir)
			_, _ = m.run(ctx, md.Source, nil, "worktree", "prune")
		}
		unlock()
	}
	_ = os.RemoveAll(dir)
	_ = os.Remove(dir + ".json")
}
