package workspace

import (
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkMergeRound is a cloud merge turn's git work: two parallel
// turns' commits (made on another machine, kept under their turn refs)
// merged into the thread branch on this machine's mirror and pushed with
// a lease (MergeRound: fetch, worktree, two merges, push, turn refs
// dropped), beside the same fetch, two merges and push run by hand in a
// clone, over file://. Only the merges are timed, not the turns.
func BenchmarkMergeRound(b *testing.B) {
	r := remoteOf(b, "small")
	m1, m2 := &Manager{Home: b.TempDir()}, &Manager{Home: b.TempDir()}
	ws, err := m1.Start(bg, Workspace{Repo: r.url, Cloud: true, Branch: BranchName("bench", "merge-"+strconv.Itoa(b.N))})
	if err != nil {
		b.Fatal(err)
	}
	key := "origin--bench--" + ws.Branch
	byHand := filepath.Join(b.TempDir(), "by-hand")
	gitT(b, "", "clone", "-q", r.url, byHand)
	var p pair
	n := 0
	for b.Loop() {
		var turns []Parallel
		for i := 1; i <= 2; i++ {
			step := 2*n + i
			tr, err := m2.Open(bg, Turn{Workspace: ws, Key: key, Step: step, Parallel: true})
			if err != nil {
				b.Fatal(err)
			}
			write(b, filepath.Join(tr.Dir, "f"+strconv.Itoa(i)+".txt"), strconv.Itoa(step)+"\n")
			res, err := tr.Finish(bg, "agent", Subject("w", step, "edit"))
			if err != nil {
				b.Fatal(err)
			}
			turns = append(turns, Parallel{Step: step, Commit: res.Commit})
		}
		from := ws.Head
		wsMerge := func() {
			merged, err := m1.MergeRound(bg, Turn{Workspace: ws, Key: key}, "merger", turns)
			if err != nil || len(merged.Steps) != 2 {
				b.Fatalf("merge: %+v %v", merged, err)
			}
			ws.Head = merged.Commit
		}
		gitMerge := func() {
			gitT(b, byHand, "fetch", "-q", "origin", turns[0].Commit, turns[1].Commit)
			gitT(b, byHand, "checkout", "-q", "--detach", from)
			for _, t := range turns {
				gitT(b, byHand, "merge", "-q", "--no-edit", t.Commit)
			}
			gitT(b, byHand, "push", "-q", "-f", "origin", "HEAD:refs/heads/by-hand")
		}
		if n%2 == 0 {
			p.time(&p.ws, wsMerge)
			p.time(&p.git, gitMerge)
		} else {
			p.time(&p.git, gitMerge)
			p.time(&p.ws, wsMerge)
		}
		n++
	}
	p.report(b, n)
}
