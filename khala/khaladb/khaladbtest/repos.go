package khaladbtest

import (
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// ClaimRepos: a claim with a repository filter takes only turns without
// a workspace or of a repository it admits: one matching a glob
// (path.Match: * and ? stop at a slash, classes, escapes, every other
// character literal), or, without globs, one its workflow declares; a
// claim without a filter takes any.
func ClaimRepos(t *testing.T, open Opener) {
	repos := []TurnSpec{
		{Role: "w"}, // no workspace
		{Role: "w", Repo: "https://git.example/team/app.git", Declared: true},
		{Role: "w", Repo: "https://git.example/team/sub/app.git"},
		{Role: "w", Repo: "file:///srv/b1.git"},
		{Role: "w", Repo: "https://gitXexample/team/app.git"},
		{Role: "w", Repo: "https://git.example/other/[x].git"},
	}
	// Every store queues the same threads, so thread-N is the same in each.
	queue := func(t *testing.T) khaladb.Storage {
		s := open(t)
		for i, sp := range repos {
			StartThread(t, s, "r", Epoch.Add(time.Duration(i)*time.Second), sp)
		}
		return s
	}
	ids := make([]string, len(repos))
	s := queue(t)
	all := claimIDs(t, s, khaladb.ClaimQuery{Agent: "peek", Max: 10, Now: Epoch.Add(time.Minute)})
	if len(all) != len(repos) {
		t.Fatalf("claimed %v of %d threads", all, len(repos))
	}
	for i, id := range all {
		ids[i], _, _, _ = khaladb.ParseTurnID(id)
	}
	turn := func(i int) string { return khaladb.TurnID(ids[i], 1) }
	for _, c := range []struct {
		name  string
		globs []string
		want  []string
	}{
		{"a literal dot, * within one segment", []string{"https://git.example/team/*"}, []string{turn(0), turn(1)}},
		{"a class and ?", []string{"file:///srv/[ab]?.git"}, []string{turn(0), turn(3)}},
		{"an escaped bracket", []string{`https://git.example/other/\[x\].git`}, []string{turn(0), turn(5)}},
		{"nothing matches", []string{"https://elsewhere/*"}, []string{turn(0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := khaladb.ClaimQuery{Agent: "a", Max: 10, Repos: &khaladb.RepoFilter{Globs: c.globs}, Now: Epoch.Add(time.Minute)}
			if got := claimIDs(t, queue(t), q); !slices.Equal(got, c.want) {
				t.Errorf("globs %q claimed %v, want %v", c.globs, got, c.want)
			}
		})
	}
	now := Epoch.Add(2 * time.Minute)
	s = queue(t)
	if got := claimIDs(t, s, khaladb.ClaimQuery{Agent: "a", Max: 10, Repos: &khaladb.RepoFilter{}, Now: now}); !slices.Equal(got, []string{turn(0), turn(1)}) {
		t.Errorf("the declared repositories only: claimed %v, want %v", got, []string{turn(0), turn(1)})
	}
	if got := claimIDs(t, s, khaladb.ClaimQuery{Agent: "a", Max: 10, Now: now}); !slices.Equal(got, []string{turn(2), turn(3), turn(4), turn(5)}) {
		t.Errorf("no filter: claimed %v, want the rest", got)
	}
}

// claimIDs claims with q and returns the claimed turns' ids, in order.
func claimIDs(t *testing.T, s khaladb.Storage, q khaladb.ClaimQuery) []string {
	t.Helper()
	turns, err := s.Claim(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tk := range turns {
		out = append(out, tk.ID)
	}
	return out
}
