package khalapg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// claimResult is what one claim of a batch got.
type claimResult struct {
	turns []khaladb.Turn
	err   error
}

// batchClaims runs claims qs (each with its context) as claims that came
// while a statement of their filters was under way, and returns what each
// got once that statement ended: they share the next one.
func batchClaims(t *testing.T, p *Store, ctxs []context.Context, qs []khaladb.ClaimQuery) []claimResult {
	t.Helper()
	out := make([]claimResult, len(qs))
	underWay(t, &p.batches.batcher, filterKey(qs[0]), len(qs), func(i int) {
		out[i].turns, out[i].err = p.Claim(ctxs[i], qs[i])
	})
	return out
}

func claimQuery(agent string, max int) khaladb.ClaimQuery {
	return khaladb.ClaimQuery{Agent: agent, Max: max, Now: khaladbtest.Epoch}
}

// Claims that come while one of their filters is under way share the
// next statement: each gets its own turns, leased to it, earlier claims
// first.
func TestClaimBatchSharesStatement(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	for range 4 {
		khaladbtest.StartThread(t, p, "wf", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	}
	ctx := t.Context()
	before := p.ClaimStats()
	got := batchClaims(t, p, []context.Context{ctx, ctx, ctx},
		[]khaladb.ClaimQuery{claimQuery("ann", 2), claimQuery("bob", 1), claimQuery("cat", 2)})
	if st := p.ClaimStats(); st.Claims-before.Claims != 3 || st.Statements-before.Statements != 1 {
		t.Fatalf("3 claims took %d statements (stats %+v)", st.Statements-before.Statements, st)
	}
	want := map[string]int{"ann": 2, "bob": 1, "cat": 1} // four turns: the last claim gets what is left
	seen := map[string]bool{}
	for i, r := range got {
		agent := []string{"ann", "bob", "cat"}[i]
		if r.err != nil || len(r.turns) != want[agent] {
			t.Fatalf("%s got %d turns (%v), want %d", agent, len(r.turns), r.err, want[agent])
		}
		for _, tk := range r.turns {
			if tk.Agent != agent || tk.State != khaladb.TurnClaimed || seen[tk.ID] {
				t.Fatalf("%s got %s: agent %q, state %s, seen before %v", agent, tk.ID, tk.Agent, tk.State, seen[tk.ID])
			}
			seen[tk.ID] = true
			// As stored, and as its turn.started event says.
			stored := pgQueryString(t, dsn, fmt.Sprintf("SELECT agent || ' ' || claim FROM khala_turns WHERE thread = %d AND step = %d",
				threadNumber(t, tk.Thread), tk.Step))
			if stored != agent+" "+tk.Claim {
				t.Errorf("%s stored as %q, want %q", tk.ID, stored, agent+" "+tk.Claim)
			}
			event := pgQueryString(t, dsn, fmt.Sprintf("SELECT agent FROM khala_events WHERE thread = %d AND type = 'turn.started'",
				threadNumber(t, tk.Thread)))
			if event != agent {
				t.Errorf("%s's turn.started names %q, want %q", tk.ID, event, agent)
			}
		}
	}
	// The earlier claims have the older threads.
	if !slices.IsSortedFunc(append(append([]khaladb.Turn{}, got[0].turns...), got[1].turns...), func(a, b khaladb.Turn) int {
		return int(threadNumber(t, a.Thread) - threadNumber(t, b.Thread))
	}) {
		t.Errorf("claims in batch order got %v then %v", got[0].turns, got[1].turns)
	}
}

// A claim whose caller has gone still gets the turns its batch claimed
// for it (the server gives them back); the statement is cancelled only
// when every caller in it has gone, and then claims nothing.
func TestClaimBatchCancel(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	for range 4 {
		khaladbtest.StartThread(t, p, "wf", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	got := batchClaims(t, p, []context.Context{gone, t.Context()}, []khaladb.ClaimQuery{claimQuery("ann", 1), claimQuery("bob", 1)})
	for i, r := range got {
		if r.err != nil || len(r.turns) != 1 {
			t.Fatalf("claim %d: %d turns, %v; want one each", i, len(r.turns), r.err)
		}
	}
	got = batchClaims(t, p, []context.Context{gone, gone}, []khaladb.ClaimQuery{claimQuery("ann", 1), claimQuery("bob", 1)})
	for i, r := range got {
		if !errors.Is(r.err, context.Canceled) || len(r.turns) != 0 {
			t.Fatalf("claim %d of a batch whose callers are gone: %d turns, %v; want context.Canceled", i, len(r.turns), r.err)
		}
	}
	if n := pgQueryInt(t, dsn, "SELECT count(*) FROM khala_turns WHERE state = 'queued'"); n != 2 {
		t.Fatalf("%d turns queued after a cancelled batch, want 2", n)
	}
}

// Many agents claiming at once through one replica: each turn is claimed
// once, by the agent it is leased to, however the claims were batched.
func TestClaimBatchConcurrent(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	const threads = 200
	for range threads {
		khaladbtest.StartThread(t, p, "wf", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	}
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	for a := range 8 {
		agent := fmt.Sprintf("agent-%d", a)
		wg.Go(func() {
			for {
				ts, err := p.Claim(t.Context(), claimQuery(agent, 1+a%2))
				if err != nil {
					t.Error(err)
					return
				}
				if len(ts) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range ts {
					if prev, ok := owner[tk.ID]; ok || tk.Agent != agent {
						t.Errorf("%s claimed by %s (agent %q), and before by %q", tk.ID, agent, tk.Agent, prev)
					}
					owner[tk.ID] = agent
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != threads {
		t.Fatalf("%d of %d turns claimed", len(owner), threads)
	}
	st := p.ClaimStats()
	t.Logf("%d claims in %d statements", st.Claims, st.Statements)
}

func threadNumber(t *testing.T, id string) int64 {
	n, ok := pgThreadID(id)
	if !ok {
		t.Fatalf("thread id %q", id)
	}
	return int64(n)
}

// What a claimed turn costs the database by the turns a statement claims
// (the database's CPU, every backend's, per turn; and the time per turn):
// why a replica's concurrent claims share statements.
//
//	go test ./khala/khaladb/khalapg -run '^$' -bench ClaimBatch -benchtime 1x
func BenchmarkClaimBatch(b *testing.B) {
	for _, size := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("turns=%d", size), func(b *testing.B) {
			p := openPG(b, pgtest.Database(b))
			const turns = 2400
			for range turns {
				khaladbtest.StartThread(b, p, "bench", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
			}
			for b.Loop() {
				n := 0
				cpu, start := pgtest.ServerCPU(), time.Now()
				for n < turns {
					got, err := p.Claim(b.Context(), claimQuery("agent", size))
					if err != nil || len(got) != size {
						b.Fatalf("claimed %d of %d: %v", len(got), size, err)
					}
					n += len(got)
				}
				b.ReportMetric(float64((pgtest.ServerCPU()-cpu).Microseconds())/turns, "db-cpu-us/turn")
				b.ReportMetric(float64(time.Since(start).Microseconds())/turns, "us/turn")
				b.StopTimer()
				if _, err := p.pool.Exec(b.Context(), "UPDATE khala_turns SET state = 'queued'"); err != nil { // for the next iteration
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// What a claim's repository filter costs, one turn per claim, every turn
// of a workspace the filter admits (the last glob of three matches):
// beside no filter, in one run.
//
//	go test ./khala/khaladb/khalapg -run '^$' -bench ClaimRepoFilter -benchtime 1x
func BenchmarkClaimRepoFilter(b *testing.B) {
	filters := []struct {
		name string
		f    *khaladb.RepoFilter
	}{
		{"none", nil},
		{"declared", &khaladb.RepoFilter{}},
		{"globs", &khaladb.RepoFilter{Globs: []string{"https://a.example/*", "git@b.example:*", "https://git.example/team/*"}}},
	}
	for _, c := range filters {
		b.Run("filter="+c.name, func(b *testing.B) {
			p := openPG(b, pgtest.Database(b))
			const turns = 1200
			for range turns {
				khaladbtest.StartThread(b, p, "bench", khaladbtest.Epoch,
					khaladbtest.TurnSpec{Role: "a", Repo: "https://git.example/team/app.git", Declared: true})
			}
			for b.Loop() {
				start := time.Now()
				for n := 0; n < turns; n++ {
					q := claimQuery("agent", 1)
					q.Repos = c.f
					if got, err := p.Claim(b.Context(), q); err != nil || len(got) != 1 {
						b.Fatalf("claimed %d: %v", len(got), err)
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/turns, "us/turn")
				b.StopTimer()
				if _, err := p.pool.Exec(b.Context(), "UPDATE khala_turns SET state = 'queued'"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
