package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Turn says which worktree a turn works in and where it starts.
type Turn struct {
	Workspace        // Head is the commit the turn starts from ("" = Base)
	Key       string // the thread on this machine, e.g. "origin/code-review#thread-7"
	Step      int
	Parallel  bool // one of parallel turns: its own worktree; Finish leaves the branch to Merge
}

// Tree is a turn's worktree, from Open to Finish.
type Tree struct {
	Dir   string // the worktree: NERVE_WORKDIR
	Start string // the commit the turn started from

	m    *Manager
	turn Turn
	src  source
	meta treeMeta
	path string // of meta
	// drop are turn refs a cloud publish deletes in its push (Merge's
	// merged turns), dropped says it did.
	drop    []string
	dropped bool
}

// treeMeta is what the daemon keeps beside a worktree, to reuse it, to
// repair it, and to undo a publication a crash interrupted.
type treeMeta struct {
	Key     string `json:"key"`
	Step    int    `json:"step,omitempty"`
	Source  string `json:"source"` // where git runs for the repository
	Cloud   bool   `json:"cloud,omitempty"`
	Admin   string `json:"admin"` // the worktree's git dir, what its .git file names
	Branch  string `json:"branch"`
	Start   string `json:"start"`             // the head the last turn started from
	Head    string `json:"head"`              // the worktree's commit after the last Finish
	State   string `json:"state"`             // stateTurn, statePublishing or stateIdle
	Pending string `json:"pending,omitempty"` // the commit being published
}

const (
	stateTurn       = "turn"
	statePublishing = "publishing"
	stateIdle       = "idle"
)

func (t Turn) name() string {
	if t.Parallel {
		return dirName(t.Key + "#step-" + strconv.Itoa(t.Step))
	}
	return dirName(t.Key)
}

// Open returns the worktree turn t works in, at t.Head (t.Base for the
// first turn): the thread's worktree on this machine reused as it is when
// its last turn left it there, reset when it is anywhere else (a crash, an
// agent's mess, another machine's turn), made when there is none. A cloud
// thread's mirror is fetched only when it lacks the commit.
func (m *Manager) Open(ctx context.Context, t Turn) (*Tree, error) {
	start := t.Head
	if start == "" {
		start = t.Base
	}
	if start == "" || t.Key == "" {
		return nil, wsErr(ErrUnknownRev, "the turn names no thread key or start commit")
	}
	name := t.name()
	tr := &Tree{Dir: filepath.Join(m.worktreesDir(), name), Start: start, m: m, turn: t,
		path: filepath.Join(m.worktreesDir(), name+".json")}
	old, _ := readMeta(tr.path)
	if old != nil && old.Source == m.sourceDir(t.Workspace) && exists(old.Source) {
		// A worktree of this repository is here: no need to ask git again.
		tr.src = source{dir: old.Source, cloud: t.Cloud, repo: t.Repo}
		if !t.Cloud {
			tr.src.repo = old.Source
		}
	} else {
		var err error
		if tr.src, err = m.source(ctx, t.Workspace); err != nil {
			return nil, err
		}
	}
	src := tr.src
	if old != nil && old.Source != src.dir {
		m.removeTree(ctx, tr.Dir, old)
		old = nil
	}
	if old != nil && old.State == statePublishing {
		if err := m.undoPublish(ctx, src, old, t.Workspace); err != nil {
			return nil, err
		}
	} else if old != nil && old.State == stateIdle && old.Head != "" && old.Head != old.Start {
		// The last turn here published old.Head, but the thread still
		// starts from old.Start: the daemon died after the publication
		// and before the thread recorded it, and the turn runs again.
		md := *old
		md.Pending = old.Head
		if err := m.undoPublish(ctx, src, &md, t.Workspace); err != nil {
			return nil, err
		}
	}
	if err := m.checkOwnBranch(ctx, src, t.Workspace); err != nil {
		return nil, err
	}
	// Whether the repository has start is known without asking when this
	// worktree was there already, or the mirror was cloned just now (a
	// failing worktree add then says which).
	known := old != nil && (old.Head == start || old.Start == start) || src.fresh
	if !known {
		if err := m.ensure(ctx, src, start, "commit"); err != nil {
			return nil, err
		}
	}
	if old != nil {
		tr.meta = *old
		if err := tr.reuse(ctx); err == nil {
			return tr, nil
		}
		m.removeTree(ctx, tr.Dir, old)
	}
	if err := tr.add(ctx); err != nil {
		return nil, err
	}
	return tr, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// reuse brings an existing worktree to the turn's start.
func (tr *Tree) reuse(ctx context.Context) error {
	if err := tr.repair(); err != nil {
		return err
	}
	// The last Finish left the worktree clean at its commit: reused as is
	// when that is where this turn starts (files touched between turns,
	// outside any turn, go with the next turn's commit).
	h, err := tr.where(ctx)
	if err != nil || h.oid != tr.Start || h.branch != "" || tr.meta.State != stateIdle {
		if _, err := tr.m.run(ctx, tr.Dir, nil, "checkout", "--quiet", "--detach", "--force", tr.Start); err != nil {
			return err
		}
		if _, err := tr.m.run(ctx, tr.Dir, nil, "clean", "-ffdq"); err != nil {
			return err
		}
	}
	return tr.save(stateTurn, "")
}

// add makes a fresh worktree at the turn's start.
func (tr *Tree) add(ctx context.Context) error {
	m := tr.m
	if err := os.MkdirAll(m.worktreesDir(), 0o700); err != nil {
		return wsErr(ErrGit, fmt.Sprintf("create %s: %v", m.worktreesDir(), err))
	}
	err := tr.worktreeAdd(ctx)
	if err != nil && !m.has(ctx, tr.src.dir, tr.Start) {
		if err := m.ensure(ctx, tr.src, tr.Start, "commit"); err != nil {
			return err
		}
		err = tr.worktreeAdd(ctx)
	}
	if err != nil {
		return fail("add a worktree for "+tr.turn.Key, err)
	}
	dotgit, err := os.ReadFile(filepath.Join(tr.Dir, ".git"))
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(dotgit)), "gitdir: ")
	if err != nil || !ok {
		return wsErr(ErrWorktree, fmt.Sprintf("git made worktree %s without its .git file", tr.Dir))
	}
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(tr.Dir, admin)
	}
	tr.meta = treeMeta{Key: tr.turn.Key, Source: tr.src.dir, Cloud: tr.src.cloud,
		Admin: admin, Branch: tr.turn.Branch}
	if tr.turn.Parallel {
		tr.meta.Step = tr.turn.Step
	}
	return tr.save(stateTurn, "")
}

func (tr *Tree) worktreeAdd(ctx context.Context) error {
	defer tr.m.lock(tr.src.dir)()
	_ = os.RemoveAll(tr.Dir)
	_, err := tr.m.run(ctx, tr.src.dir, nil, "worktree", "add", "--quiet", "--force", "--detach", "--end-of-options", tr.Dir, tr.Start)
	return err
}

// repair puts back the .git file of a worktree an agent deleted it from.
func (tr *Tree) repair() error {
	dotgit := filepath.Join(tr.Dir, ".git")
	if _, err := os.Lstat(dotgit); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return wsErr(ErrWorktree, fmt.Sprintf("worktree %s: %v", tr.Dir, err))
	}
	if _, err := os.Stat(tr.Dir); err != nil {
		return wsErr(ErrWorktree, fmt.Sprintf("worktree %s is gone", tr.Dir))
	}
	if _, err := os.Stat(tr.meta.Admin); tr.meta.Admin == "" || err != nil {
		return wsErr(ErrWorktree, fmt.Sprintf("worktree %s lost its .git file and git no longer knows it", tr.Dir))
	}
	if err := os.WriteFile(dotgit, []byte("gitdir: "+tr.meta.Admin+"\n"), 0o644); err != nil {
		return wsErr(ErrWorktree, fmt.Sprintf("restore the .git file of %s: %v", tr.Dir, err))
	}
	return nil
}

// wtHead is where a worktree's HEAD is: a commit, and the branch when
// the agent checked one out.
type wtHead struct {
	oid    string
	branch string // "" when detached, as nerve leaves it
}

// where reads the worktree's HEAD from its file (no git process on the
// common path), asking git only when HEAD names a branch.
func (tr *Tree) where(ctx context.Context) (wtHead, error) {
	b, err := os.ReadFile(filepath.Join(tr.meta.Admin, "HEAD"))
	if err != nil {
		return wtHead{}, wsErr(ErrWorktree, fmt.Sprintf("worktree %s: git no longer knows it (%v)", tr.Dir, err))
	}
	h := strings.TrimSpace(string(b))
	ref, onBranch := strings.CutPrefix(h, "ref: ")
	if !onBranch {
		return wtHead{oid: h}, nil
	}
	out, err := tr.m.run(ctx, tr.Dir, nil, "rev-parse", "--verify", "--quiet", "HEAD")
	if err != nil {
		return wtHead{}, wsErr(ErrWorktree, fmt.Sprintf("the agent left worktree %s on %s, which has no commit", tr.Dir, ref))
	}
	return wtHead{oid: strings.TrimSpace(out), branch: strings.TrimPrefix(ref, "refs/heads/")}, nil
}

// save records the tree's state; a rename makes it whole after a kill -9.
func (tr *Tree) save(state, pending string) error {
	tr.meta.State, tr.meta.Pending, tr.meta.Start = state, pending, tr.Start
	b, _ := json.Marshal(tr.meta)
	tmp := tr.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return wsErr(ErrGit, fmt.Sprintf("record worktree state: %v", err))
	}
	if err := os.Rename(tmp, tr.path); err != nil {
		return wsErr(ErrGit, fmt.Sprintf("record worktree state: %v", err))
	}
	return nil
}

func readMeta(path string) (*treeMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var md treeMeta
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&md); err != nil {
		return nil, err
	}
	return &md, nil
}

// undoPublish handles a crash between moving a branch and recording the
// turn: if the thread still starts from the old head and the branch is at
// the unrecorded commit, the branch goes back (with a lease), since the
// turn runs again.
func (m *Manager) undoPublish(ctx context.Context, src source, md *treeMeta, w Workspace) error {
	if md.Step != 0 || md.Pending == "" || w.Head != md.Start {
		return nil
	}
	if err := m.fetch(ctx, src); err != nil {
		return err
	}
	if m.resolve(ctx, src.dir, "refs/heads/"+md.Branch) != md.Pending {
		return nil
	}
	back := md.Start
	if w.firstPush() {
		back = "" // the thread's first push made the branch: it goes again
	}
	return m.moveBranch(ctx, src, md.Branch, back, md.Pending)
}
