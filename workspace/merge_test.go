package workspace

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestMergeParallelTurns: three parallel turns off one head, two machines
// of a cloud thread; steps 2 and 3 merge in step order, step 4 conflicts
// with step 2: the branch stays at the last clean merge and the error
// names the file.
func TestMergeParallelTurns(t *testing.T) {
	for _, cloud := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "cloud"}[cloud], func(t *testing.T) {
			repo := newRepo(t)
			if cloud {
				repo = newRemote(t)
			}
			m1, m2 := newManager(t), newManager(t)
			if !cloud {
				m2 = m1
			}
			ws, err := m1.Start(bg, Workspace{Repo: repo, Cloud: cloud, Branch: "nerve/split/thread-1"})
			if err != nil {
				t.Fatal(err)
			}
			key := "split#thread-1"
			edits := map[int][2]string{
				2: {"a.txt", "one\nTWO by step 2\nthree\n"},
				3: {"c.txt", "new file by step 3\n"},
				4: {"a.txt", "one\ntwo by step 4\nthree\n"},
			}
			var turns []Parallel
			var dirs []string
			for _, step := range []int{4, 2, 3} { // answers arrive in any order
				m := m1
				if step == 3 {
					m = m2
				}
				tr, err := m.Open(bg, Turn{Workspace: ws, Key: key, Step: step, Parallel: true})
				if err != nil {
					t.Fatal(err)
				}
				dirs = append(dirs, tr.Dir)
				write(t, filepath.Join(tr.Dir, edits[step][0]), edits[step][1])
				res, err := tr.Finish(bg, "agent", Subject("worker", step, "edit"))
				if err != nil {
					t.Fatal(err)
				}
				if res.Ref == "" || res.Changes.Files != 1 {
					t.Errorf("step %d: %+v", step, res)
				}
				turns = append(turns, Parallel{Step: step, Commit: res.Commit})
			}
			if u := slices.Compact(slices.Sorted(slices.Values(dirs))); len(u) != 3 {
				t.Errorf("parallel turns shared worktrees: %v", dirs)
			}
			if got := branchAt(t, repo, ws.Branch); got != pushed(ws) {
				t.Fatalf("a parallel turn moved the branch to %s", got)
			}

			merged, err := m1.Merge(bg, Turn{Workspace: ws, Key: key}, "laptop-1", turns)
			e := wantErr(t, err, ErrConflict, KindMerge)
			if e.Step != 4 || !slices.Equal(e.Files, []string{"a.txt"}) {
				t.Errorf("conflict: step %d, files %v; want step 4 in a.txt", e.Step, e.Files)
			}
			if !slices.Equal(merged.Steps, []int{2, 3}) {
				t.Errorf("merged steps %v; want [2 3]", merged.Steps)
			}
			branch := gitT(t, repo, "rev-parse", "refs/heads/"+ws.Branch)
			if branch != merged.Commit {
				t.Fatalf("branch at %s; want the last clean merge %s", branch, merged.Commit)
			}
			if got := gitT(t, repo, "show", branch+":a.txt"); got != "one\nTWO by step 2\nthree" {
				t.Errorf("a.txt on the branch: %q", got)
			}
			if got := gitT(t, repo, "show", branch+":c.txt"); got != "new file by step 3" {
				t.Errorf("c.txt on the branch: %q", got)
			}
			if merged.Changes != (Changes{Files: 2, Insertions: 2, Deletions: 1}) {
				t.Errorf("merge changes %+v", merged.Changes)
			}
			// The next turn starts from the merge, in the thread's worktree.
			tr, err := m1.Open(bg, Turn{Workspace: Workspace{Repo: repo, Cloud: cloud, Base: ws.Base, Branch: ws.Branch, Head: merged.Commit}, Key: key, Step: 5})
			if err != nil {
				t.Fatal(err)
			}
			if st := gitT(t, tr.Dir, "status", "--porcelain"); st != "" {
				t.Errorf("thread worktree dirty after the merge: %s", st)
			}
			// The conflicting turn's commit is still reachable for a person.
			if _, err := gitE(repo, "rev-parse", "--verify", TurnRef(ws.Branch, 4, turns[0].Commit)); err != nil {
				t.Errorf("the unmerged turn's ref is gone: %v", err)
			}
		})
	}
}
