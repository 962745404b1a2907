package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLocalThreadsInParallel runs two local threads at once on one
// repository: separate worktrees, separate branches, the user's checkout
// (a staged change, an unstaged one, an untracked file) untouched.
func TestLocalThreadsInParallel(t *testing.T) {
	repo := newRepo(t)
	write(t, filepath.Join(repo, "a.txt"), "one\ntwo\nthree\nstaged\n")
	gitT(t, repo, "add", "a.txt")
	write(t, filepath.Join(repo, "a.txt"), "one\ntwo\nthree\nstaged\nunstaged\n")
	write(t, filepath.Join(repo, "notes.txt"), "untracked\n")
	before := checkout(t, repo)
	mainHead := gitT(t, repo, "rev-parse", "main")

	m := newManager(t)
	var wg sync.WaitGroup
	dirs := make([]string, 2)
	results := make([]Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			thread := fmt.Sprintf("thread-%d", i+1)
			ws, err := m.Start(bg, Workspace{Repo: repo, Base: "main", Branch: BranchName("review", thread)})
			if err != nil {
				errs[i] = err
				return
			}
			tr, err := m.Open(bg, Turn{Workspace: ws, Key: "review#" + thread, Step: 1})
			if err != nil {
				errs[i] = err
				return
			}
			dirs[i] = tr.Dir
			os.WriteFile(filepath.Join(tr.Dir, thread+".txt"), []byte("by "+thread+"\n"), 0o644)
			results[i], errs[i] = tr.Finish(bg, "laptop-1", Subject("author", 1, "Add a file\nmore"))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("thread %d: %v", i+1, err)
		}
	}
	if dirs[0] == dirs[1] {
		t.Fatalf("both threads worked in %s", dirs[0])
	}
	for i, d := range dirs {
		if !strings.HasPrefix(d, filepath.Join(m.Home, "worktrees")) {
			t.Errorf("worktree %s is not under NERVE_HOME/worktrees", d)
		}
		thread := fmt.Sprintf("thread-%d", i+1)
		branch := "nerve/review/" + thread
		if got := gitT(t, repo, "rev-parse", branch); got != results[i].Commit {
			t.Errorf("%s at %s; want the turn's commit %s", branch, got, results[i].Commit)
		}
		if got := gitT(t, repo, "log", "-1", "--format=%an|%cn|%s|%P", branch); got != "laptop-1|laptop-1|author, step 1: Add a file|"+mainHead {
			t.Errorf("commit: %q", got)
		}
		if got := gitT(t, repo, "show", "--name-only", "--format=", branch); got != thread+".txt" {
			t.Errorf("%s changed %q; want only its own file", branch, got)
		}
		if want := (Changes{Files: 1, Insertions: 1}); results[i].Changes != want {
			t.Errorf("changes %+v; want %+v", results[i].Changes, want)
		}
	}
	if after := checkout(t, repo); after != before {
		t.Errorf("the user's checkout changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestLocalConsecutiveTurns: the second turn reuses the thread's worktree
// at the first turn's commit; commits the agent made itself are kept as
// they are, and what it left uncommitted is committed after them.
func TestLocalConsecutiveTurns(t *testing.T) {
	repo := newRepo(t)
	m := newManager(t)
	ws, err := m.Start(bg, Workspace{Repo: repo, Branch: BranchName("fix", "thread-3")})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Base != gitT(t, repo, "rev-parse", "HEAD") || ws.Head != ws.Base {
		t.Fatalf("start: %+v", ws)
	}
	turn := Turn{Workspace: ws, Key: "fix#thread-3", Step: 1}
	tr, err := m.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr.Dir, "a.txt"), "one\n2\nthree\n")
	r1, err := tr.Finish(bg, "agent-a", Subject("author", 1, "Fix two"))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Changes != (Changes{Files: 1, Insertions: 1, Deletions: 1}) {
		t.Errorf("turn 1 changes %+v", r1.Changes)
	}

	turn.Head, turn.Step = r1.Commit, 2
	tr2, err := m.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	if tr2.Dir != tr.Dir || tr2.Start != r1.Commit {
		t.Fatalf("turn 2 in %s at %s; want %s at %s", tr2.Dir, tr2.Start, tr.Dir, r1.Commit)
	}
	write(t, filepath.Join(tr2.Dir, "c.txt"), "sea\n")
	gitT(t, tr2.Dir, "add", "c.txt")
	gitT(t, tr2.Dir, "commit", "-q", "-m", "agent's own commit")
	write(t, filepath.Join(tr2.Dir, "b.txt"), "bee\nbuzz\n")
	r2, err := tr2.Finish(bg, "agent-b", Subject("author", 2, ""))
	if err != nil {
		t.Fatal(err)
	}
	log := gitT(t, repo, "log", "--format=%an %s", ws.Base+".."+ws.Branch)
	want := "agent-b author, step 2\nTester agent's own commit\nagent-a author, step 1: Fix two"
	if log != want {
		t.Errorf("log:\n%s\nwant:\n%s", log, want)
	}
	if r2.Changes != (Changes{Files: 2, Insertions: 2}) {
		t.Errorf("turn 2 changes %+v", r2.Changes)
	}

	// A turn that changes nothing leaves the branch and reports zero files.
	turn.Head, turn.Step = r2.Commit, 3
	tr3, err := m.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := tr3.Finish(bg, "agent-a", "reviewer, step 3: nothing")
	if err != nil {
		t.Fatal(err)
	}
	if r3.Commit != r2.Commit || r3.Changes.Files != 0 {
		t.Errorf("an empty turn gave %+v", r3)
	}

	ws.Head = r3.Commit
	var diff strings.Builder
	if err := m.Diff(bg, ws, &diff, false); err != nil {
		t.Fatal(err)
	}
	if d := diff.String(); !strings.Contains(d, "3 files changed, 3 insertions(+), 1 deletion(-)") || !strings.Contains(d, "+buzz") {
		t.Errorf("diff:\n%s", d)
	}
	if c, err := m.Changes(bg, ws); err != nil || c != (Changes{Files: 3, Insertions: 3, Deletions: 1}) {
		t.Errorf("Changes = %+v, %v; want the thread's 3 files, 3 insertions, 1 deletion", c, err)
	}
}

// TestCheckout makes a local branch of a thread's head in the user's
// repository and switches to it; an existing branch behind the head is
// fast-forwarded, one that diverged is refused and left alone.
func TestCheckout(t *testing.T) {
	repo := newRepo(t)
	m := newManager(t)
	ws, err := m.Start(bg, Workspace{Repo: repo, Branch: "nerve/w/thread-1"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := m.Open(bg, Turn{Workspace: ws, Key: "w#thread-1", Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr.Dir, "new.txt"), "new\n")
	res, err := tr.Finish(bg, "agent", "author, step 1: new")
	if err != nil {
		t.Fatal(err)
	}
	ws.Head = res.Commit

	// An untracked file (the thread also adds it): refused before git is
	// asked to switch, the file named.
	write(t, filepath.Join(repo, "new.txt"), "mine\n")
	_, err = m.Checkout(bg, repo, ws, "")
	wantErr(t, err, ErrDirty, KindWorkspace)
	if !strings.Contains(err.Error(), "untracked files (new.txt)") {
		t.Errorf("checkout over an untracked file: %v; want it named", err)
	}
	os.Remove(filepath.Join(repo, "new.txt"))
	// Another repository is not the thread's.
	_, err = m.Checkout(bg, newRepo(t), ws, "")
	wantErr(t, err, ErrOtherRepo, KindWorkspace)

	gitT(t, repo, "branch", "behind", ws.Base)
	gitT(t, repo, "branch", "diverged", gitT(t, repo, "commit-tree", "main~1^{tree}", "-p", "main~1", "-m", "elsewhere"))
	diverged := gitT(t, repo, "rev-parse", "diverged")
	for _, name := range []string{"", "review", "behind"} {
		got, err := m.Checkout(bg, repo, ws, name)
		if err != nil {
			t.Fatalf("checkout %q: %v", name, err)
		}
		if cur := gitT(t, repo, "symbolic-ref", "--short", "HEAD"); cur != got || gitT(t, repo, "rev-parse", "HEAD") != res.Commit {
			t.Errorf("checkout %q: on %s at %s", name, cur, gitT(t, repo, "rev-parse", "HEAD"))
		}
		if read(t, filepath.Join(repo, "new.txt")) != "new\n" {
			t.Errorf("checkout %q: the thread's file is not in the working tree", name)
		}
	}
	_, err = m.Checkout(bg, repo, ws, "diverged")
	wantErr(t, err, ErrBranchExists, KindWorkspace)
	if gitT(t, repo, "rev-parse", "diverged") != diverged {
		t.Error("a refused checkout moved the branch")
	}
	_, err = m.Checkout(bg, repo, ws, "bad name")
	wantErr(t, err, ErrBadBranch, KindWorkspace)
}

func TestParseShortstat(t *testing.T) {
	for out, want := range map[string]Changes{
		"[detached HEAD 1a2b3c4] author, step 1: x\n 1 file changed, 1 insertion(+)\n create mode 100644 x.txt\n": {1, 1, 0},
		" 3 files changed, 10 insertions(+), 2 deletions(-)\n":                                                    {3, 10, 2},
		" 2 files changed, 5 deletions(-)\n":                                                                      {2, 0, 5},
		" 1 file changed, 0 insertions(+), 0 deletions(-)\n":                                                      {1, 0, 0},
	} {
		if got, ok := parseShortstat(out); !ok || got != want {
			t.Errorf("parseShortstat(%q) = %+v, %v; want %+v", out, got, ok, want)
		}
	}
	if _, ok := parseShortstat("[detached HEAD 1a2b3c4] author, step 1: 3 files changed\n"); ok {
		t.Error("a subject was read as a summary")
	}
}
