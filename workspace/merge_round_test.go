package workspace

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeRoundAgain: a cloud round's merge run again (its daemon died
// after the push, before the answer) on another machine and on the same
// one ends where the first run put the branch, with no second merge; a
// conflicting round ends at the same clean merge each time; a branch moved
// elsewhere is refused and nothing is merged.
func TestMergeRoundAgain(t *testing.T) {
	for _, clash := range []bool{false, true} {
		remote := newRemote(t)
		m1, m2 := newManager(t), newManager(t)
		ws, err := m1.Start(bg, Workspace{Repo: remote, Cloud: true, Branch: "nerve/split/thread-1"})
		if err != nil {
			t.Fatal(err)
		}
		key := "origin--split--thread-1"
		var turns []Parallel
		for _, step := range []int{1, 2} {
			m := map[int]*Manager{1: m1, 2: m2}[step]
			tr, err := m.Open(bg, Turn{Workspace: ws, Key: key, Step: step, Parallel: true})
			if err != nil {
				t.Fatal(err)
			}
			name := map[bool]string{false: "f" + string(rune('0'+step)) + ".txt", true: "same.txt"}[clash]
			write(t, filepath.Join(tr.Dir, name), strings.Repeat("x", step)+"\n")
			res, err := tr.Finish(bg, "agent", Subject("w", step, "edit"))
			if err != nil {
				t.Fatal(err)
			}
			turns = append(turns, Parallel{Step: step, Commit: res.Commit})
		}
		round := Turn{Workspace: ws, Key: key}
		first, err1 := m1.MergeRound(bg, round, "m1", turns)
		if clash != (err1 != nil) {
			t.Fatalf("clash %v: first merge: %v", clash, err1)
		}
		for _, m := range []*Manager{m2, m1} {
			again, err := m.MergeRound(bg, round, "again", turns)
			if clash != (err != nil) || again.Commit != first.Commit {
				t.Fatalf("clash %v: merge again: %+v %v; want the first run's %s", clash, again, err, first.Commit)
			}
			if clash {
				wantErr(t, err, ErrConflict, KindMerge)
			}
		}
		if got := gitT(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != first.Commit {
			t.Fatalf("branch at %s; want %s", got, first.Commit)
		}
		want := map[bool]string{false: "1", true: "0"}[clash]
		if n := gitT(t, remote, "rev-list", "--merges", "--count", ws.Base+".."+ws.Branch); n != want {
			t.Errorf("clash %v: %s merge commits; want %s", clash, n, want)
		}
		if clash {
			continue
		}
		// Someone moved the branch to a commit off the round's head: the
		// round was the thread's first push, so the branch is not its own.
		other := gitT(t, remote, "commit-tree", "-m", "elsewhere", ws.Base+"^{tree}")
		gitT(t, remote, "update-ref", "refs/heads/"+ws.Branch, other)
		_, err = m2.MergeRound(bg, round, "m2", turns)
		wantErr(t, err, ErrBranchExists, KindWorkspace)
		if got := gitT(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != other {
			t.Errorf("branch moved to %s by a refused merge", got)
		}
	}
}
