package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCloudTwoMachines is a cloud code-review through a bare repository on
// disk, served by two machines (two NERVE_HOMEs): each turn starts from the
// commit the other pushed.
func TestCloudTwoMachines(t *testing.T) {
	remote := newRemote(t)
	m1, m2 := newManager(t), newManager(t)
	ws, err := m1.Start(bg, Workspace{Repo: remote, Cloud: true, Base: "main", Branch: BranchName("code-review", "thread-7")})
	if err != nil {
		t.Fatal(err)
	}
	if got := branchAt(t, remote, ws.Branch); got != "" || ws.Head != ws.Base {
		t.Fatalf("Start of a cloud thread made its branch on the remote (at %s), or its head %s is not its base %s", got, ws.Head, ws.Base)
	}
	key := "origin/code-review#thread-7"
	head := ws.Head
	machines := []*Manager{m1, m2, m1, m2}
	for i, m := range machines {
		step := i + 1
		tr, err := m.Open(bg, Turn{Workspace: Workspace{Repo: remote, Cloud: true, Base: ws.Base, Branch: ws.Branch, Head: head}, Key: key, Step: step})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !strings.HasPrefix(tr.Dir, m.Home) || tr.Start != head {
			t.Fatalf("step %d: worktree %s at %s", step, tr.Dir, tr.Start)
		}
		// Each turn sees every turn before it, whichever machine ran it.
		for prev := 1; prev < step; prev++ {
			if _, err := os.Stat(filepath.Join(tr.Dir, "step-"+strconv.Itoa(prev)+".txt")); err != nil {
				t.Errorf("step %d does not see step %d's file: %v", step, prev, err)
			}
		}
		write(t, filepath.Join(tr.Dir, "step-"+strconv.Itoa(step)+".txt"), "done\n")
		res, err := tr.Finish(bg, "agent-"+strconv.Itoa(step), Subject("author", step, "turn"))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got := gitT(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != res.Commit {
			t.Fatalf("step %d: remote branch at %s; want %s", step, got, res.Commit)
		}
		if parent := gitT(t, remote, "rev-parse", res.Commit+"^"); parent != head {
			t.Fatalf("step %d: commit's parent %s; want the previous head %s", step, parent, head)
		}
		if res.Changes != (Changes{Files: 1, Insertions: 1}) {
			t.Errorf("step %d: turn changes %+v", step, res.Changes)
		}
		if c, err := m.Changes(bg, Workspace{Repo: remote, Cloud: true, Base: ws.Base, Head: res.Commit}); err != nil || c.Files != step {
			t.Errorf("step %d: thread changes %+v, %v", step, c, err)
		}
		head = res.Commit
	}
	mirrors, _ := filepath.Glob(filepath.Join(m1.Home, "repos", "*.git"))
	if len(mirrors) != 1 {
		t.Errorf("machine 1 has mirrors %v; want one", mirrors)
	}

	// A person reviews the result in their own clone.
	ws.Head = head
	var diff strings.Builder
	if err := m2.Diff(bg, ws, &diff, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff.String(), "4 files changed") || strings.Contains(diff.String(), "@@") {
		t.Errorf("diff --stat:\n%s", diff.String())
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitT(t, "", "clone", "-q", remote, clone)
	name, err := newManager(t).Checkout(bg, clone, ws, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, clone, "symbolic-ref", "--short", "HEAD"); got != name || name != ws.Branch {
		t.Errorf("checkout on %q; want %q", got, ws.Branch)
	}
	if got := gitT(t, clone, "rev-parse", "HEAD"); got != head {
		t.Errorf("checkout at %s; want %s", got, head)
	}
}

// TestPushRefusedWhenRemoteMoved: two machines start a turn from the same
// head; the second to finish is refused (a lease, never a force), the
// remote keeps the first one's commit, and the refused commit is kept.
func TestPushRefusedWhenRemoteMoved(t *testing.T) {
	remote := newRemote(t)
	m1, m2 := newManager(t), newManager(t)
	ws, err := m1.Start(bg, Workspace{Repo: remote, Cloud: true, Branch: "nerve/w/thread-1"})
	if err != nil {
		t.Fatal(err)
	}
	turn := Turn{Workspace: ws, Key: "w#thread-1", Step: 1}
	tr1, err := m1.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := m2.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr1.Dir, "a.txt"), "first machine\n")
	write(t, filepath.Join(tr2.Dir, "a.txt"), "second machine\n")
	first, err := tr2.Finish(bg, "m2", "author, step 1: m2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr1.Finish(bg, "m1", "author, step 1: m1")
	e := wantErr(t, err, ErrPushRefused, KindWorkspace)
	if !strings.Contains(e.Msg, "refused") || !strings.Contains(e.Msg, "exists there already") {
		t.Errorf("message: %s", e.Msg)
	}
	if got := gitT(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != first.Commit {
		t.Errorf("remote branch at %s; want the first push %s", got, first.Commit)
	}
	lost := gitT(t, tr1.Dir, "rev-parse", "HEAD")
	if lost == ws.Head || gitT(t, m1.mirrorDir(remote), "cat-file", "-t", lost) != "commit" {
		t.Errorf("the refused turn's commit %s is not kept in the mirror", lost)
	}
	// The turn runs again on machine 1 from the remote's head.
	turn.Head = first.Commit
	tr, err := m1.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(tr.Dir, "a.txt")); got != "second machine\n" {
		t.Errorf("retry starts from %q", got)
	}
}

// TestBaseTheRemoteLacks: a base that exists only in the user's clone is
// refused with a hint to push it; so is a name the remote does not have.
func TestBaseTheRemoteLacks(t *testing.T) {
	remote := newRemote(t)
	clone := filepath.Join(t.TempDir(), "clone")
	gitT(t, "", "clone", "-q", remote, clone)
	write(t, filepath.Join(clone, "local.txt"), "not pushed\n")
	gitT(t, clone, "add", ".")
	gitT(t, clone, "commit", "-q", "-m", "local only")
	local := gitT(t, clone, "rev-parse", "HEAD")
	m := newManager(t)
	for _, base := range []string{local, "no-such-branch"} {
		_, err := m.Start(bg, Workspace{Repo: remote, Cloud: true, Base: base, Branch: "nerve/w/thread-1"})
		e := wantErr(t, err, ErrUnknownRev, KindWorkspace)
		if !strings.Contains(e.Msg, "push it first") {
			t.Errorf("message %q gives no hint", e.Msg)
		}
	}
	if _, err := gitE(remote, "rev-parse", "--verify", "refs/heads/nerve/w/thread-1"); err == nil {
		t.Error("a refused Start created the branch")
	}
	// A turn whose head the remote lacks is refused the same way.
	for _, m := range []*Manager{m, newManager(t)} { // a mirror fetched before, and a first clone
		_, err := m.Open(bg, Turn{Workspace: Workspace{Repo: remote, Cloud: true, Branch: "b", Base: local, Head: local}, Key: "w#thread-9"})
		wantErr(t, err, ErrUnknownRev, KindWorkspace)
	}
}

// TestResolveThenFirstTurnCreatesBranch: a cloud thread resolved before
// Khala numbers it has no branch yet; its first turn's push creates it
// (a lease on "absent"), and a second first turn racing it is refused.
func TestResolveThenFirstTurnCreatesBranch(t *testing.T) {
	remote := newRemote(t)
	m1, m2 := newManager(t), newManager(t)
	ws, err := m1.Resolve(bg, Workspace{Repo: remote, Cloud: true, Base: "main~1", Branch: "nerve/w/thread-4"})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Base != gitT(t, remote, "rev-parse", "main~1") || ws.Head != "" {
		t.Fatalf("resolved %+v", ws)
	}
	if _, err := gitE(remote, "rev-parse", "--verify", "refs/heads/"+ws.Branch); err == nil {
		t.Fatal("Resolve created the branch")
	}
	turn := Turn{Workspace: ws, Key: "w#thread-4", Step: 1}
	tr1, err := m1.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := m2.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	if tr1.Start != ws.Base {
		t.Errorf("first turn starts at %s; want the base", tr1.Start)
	}
	write(t, filepath.Join(tr1.Dir, "one.txt"), "1\n")
	write(t, filepath.Join(tr2.Dir, "two.txt"), "2\n")
	res, err := tr1.Finish(bg, "a", "author, step 1: first")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != res.Commit {
		t.Errorf("branch at %s; want %s", got, res.Commit)
	}
	_, err = tr2.Finish(bg, "b", "author, step 1: second")
	e := wantErr(t, err, ErrPushRefused, KindWorkspace)
	if !strings.Contains(e.Msg, "exists there already") {
		t.Errorf("message: %s", e.Msg)
	}
	_, err = m2.Resolve(bg, Workspace{Repo: remote, Cloud: true, Branch: ws.Branch})
	wantErr(t, err, ErrBranchExists, KindWorkspace)
}
