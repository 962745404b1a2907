package khalapg

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// answerClaimed starts threads of one turn each, claims them (so their
// views are kept), and answers them all as changes that came while
// another was being written: they share the next statement. stale names
// threads whose views are made stale first; u, when not nil, is what
// each answer spent. It returns the answers' errors.
func answerClaimed(t *testing.T, p *Store, dsn string, threads int, u *usage.Usage, stale ...int) ([]khaladb.Turn, []error) {
	t.Helper()
	turns := claimedThreads(t, p, threads)
	for _, i := range stale {
		// Another replica's change, as far as this one's view can tell.
		pgExec(t, dsn, fmt.Sprintf("UPDATE khala_threads SET version = version + 1 WHERE n = %d", threadNumber(t, turns[i].Thread)))
	}
	return turns, answerTogether(t, p, turns, u)
}

// claimedThreads starts threads of one turn each and claims them.
func claimedThreads(t testing.TB, p *Store, threads int) []khaladb.Turn {
	t.Helper()
	for range threads {
		khaladbtest.StartThread(t, p, "wf", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	}
	turns := khaladbtest.ClaimAll(t, p, "ann", khaladbtest.Epoch)
	if len(turns) != threads {
		t.Fatalf("claimed %d of %d", len(turns), threads)
	}
	return turns
}

// answerTogether answers turns as changes that came while another was
// being written (u: what each spent, or nil), and returns their errors.
func answerTogether(t testing.TB, p *Store, turns []khaladb.Turn, u *usage.Usage) []error {
	t.Helper()
	errs := make([]error, len(turns))
	parts := partTurns | partMessages | partEvents
	if u != nil {
		parts |= partUsage
	}
	underWay(t, &p.changes.batcher, strconv.Itoa(int(parts)), len(turns), func(i int) {
		errs[i] = answer(t, p, turns[i], u)
	})
	return errs
}

// answer answers claimed turn tk (u: what it spent, or nil).
func answer(t testing.TB, p *Store, tk khaladb.Turn, u *usage.Usage) error {
	return p.UpdateThread(t.Context(), tk.Thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := khaladbtest.AnswerChange(v, tk.ID, tk.Claim, "done "+tk.ID, khaladbtest.Epoch)
		if c == nil {
			return nil, khaladb.ErrClaimLost
		}
		if u != nil {
			m := &c.Messages[0]
			m.Usage, m.Adapter = u, "codex"
			r := usage.Row{Key: usage.KeyOf(m.At, c.Thread.Workflow, m.Role, m.Agent, m.Adapter, u)}
			r.Add(u)
			c.Spent = []usage.Row{r}
		}
		return c, nil
	})
}

// checkAnswered checks each turn's thread as its answer left it: the
// thread completed, the message stored, the events numbered without gaps.
func checkAnswered(t *testing.T, p *Store, dsn string, turns []khaladb.Turn) {
	t.Helper()
	for _, tk := range turns {
		n := threadNumber(t, tk.Thread)
		if got := pgQueryString(t, dsn, fmt.Sprintf("SELECT status FROM khala_threads WHERE n = %d", n)); got != "completed" {
			t.Errorf("%s: %s, want completed", tk.Thread, got)
		}
		if got := pgQueryString(t, dsn, fmt.Sprintf("SELECT state FROM khala_turns WHERE thread = %d", n)); got != khaladb.TurnAnswered {
			t.Errorf("%s: turn %s, want answered", tk.Thread, got)
		}
		v, err := p.Thread(t.Context(), tk.Thread)
		if err != nil || len(v.Messages) != 1 || v.Messages[0].Content != "done "+tk.ID {
			t.Errorf("%s: messages %+v, %v", tk.Thread, v.Messages, err)
		}
		seqs := pgQueryString(t, dsn, fmt.Sprintf("SELECT string_agg(seq || ' ' || type, ', ' ORDER BY seq) FROM khala_events WHERE thread = %d", n))
		want := "1 thread.started, 2 turn.queued, 3 turn.started, 4 turn.answered, 5 thread.ended"
		if last := pgQueryInt(t, dsn, fmt.Sprintf("SELECT last_seq FROM khala_event_seqs WHERE thread = %d", n)); seqs != want || last != 5 {
			t.Errorf("%s: events %q (counter %d), want %q", tk.Thread, seqs, last, want)
		}
	}
}

// Answers of several threads, made from their claims' views, share one
// statement and write what each would alone.
func TestChangeBatchSharesStatement(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	before := p.ChangeStats()
	turns, errs := answerClaimed(t, p, dsn, 3, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if st := p.ChangeStats(); st.Changes-before.Changes != 3 || st.Statements-before.Statements != 1 {
		t.Fatalf("3 answers: %d changes in %d statements, want 3 in 1", st.Changes-before.Changes, st.Statements-before.Statements)
	}
	if fp := p.FastPathStats(); fp.Fast != 3 || fp.Stale != 0 {
		t.Fatalf("fast path %+v, want 3 fast", fp)
	}
	checkAnswered(t, p, dsn, turns)
}

// One stale view in a shared statement writes none of it; each change is
// then written alone, the stale one from a locked read.
func TestChangeBatchStale(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	turns, errs := answerClaimed(t, p, dsn, 3, nil, 1)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	// 1 shared statement that wrote nothing, then 3 alone, of which the
	// stale one wrote nothing either and was made again from a locked read.
	if st, fp := p.ChangeStats(), p.FastPathStats(); st.Statements != 4 || st.Changes != 2 || fp.Fast != 2 || fp.Stale != 1 {
		t.Fatalf("change stats %+v, fast path %+v: want 2 changes in 4 statements, 2 fast, 1 stale", st, fp)
	}
	checkAnswered(t, p, dsn, turns)
}

// Answers that spent share a statement too, their usage summed in the
// rollup: threads 1 and 9 count in one shard's row, the others in theirs.
func TestChangeBatchUsage(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	u := &usage.Usage{Model: "gpt-test", InputTokens: usage.Int(100), OutputTokens: usage.Int(10), CostUSD: usage.Float(0.5), DurationMS: 20}
	turns, errs := answerClaimed(t, p, dsn, 10, u)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if st := p.ChangeStats(); st.Changes != 10 || st.Statements != 1 {
		t.Fatalf("10 answers: %+v, want one statement", st)
	}
	checkAnswered(t, p, dsn, turns)
	rows, err := p.Usage(t.Context(), usage.Filter{})
	if err != nil || len(rows) != 1 {
		t.Fatalf("usage %+v, %v: want one row", rows, err)
	}
	if r := rows[0]; r.Messages != 10 || r.InputTokens != 1000 || r.OutputTokens != 100 || r.CostUSD == nil || *r.CostUSD != 5 {
		t.Fatalf("usage %+v: want 10 messages, 1000 in, 100 out, $5", r)
	}
	if n := pgQueryInt(t, dsn, "SELECT count(*) FROM khala_usage"); n != usageShards {
		t.Fatalf("%d rollup rows, want one a shard (%d)", n, usageShards)
	}
}

// The shared statement's plan takes its threads' rows through their key,
// in the order it is given them (thread order: the lock order), and never
// walks a table, however many threads there are.
func TestChangeBatchPlan(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	var vcs []*viewChange
	for _, tk := range claimedThreads(t, p, 300)[:3] {
		v, err := p.Thread(t.Context(), tk.Thread)
		if err != nil {
			t.Fatal(err)
		}
		c := khaladbtest.AnswerChange(v, tk.ID, tk.Claim, "ok", khaladbtest.Epoch)
		st, err := changeStatement(uint64(threadNumber(t, tk.Thread)), c, v.Thread.Version)
		if err != nil {
			t.Fatal(err)
		}
		vcs = append(vcs, &viewChange{n: uint64(threadNumber(t, tk.Thread)), version: v.Thread.Version, c: c, st: st})
	}
	text := explain(t, p, sharedChangeText(batchableParts), sharedChangeArgs(vcs, batchableParts)...)
	// Each table's rows are taken in the arrays' order, one by one through
	// the key (a nested loop over the arrays).
	if strings.Contains(text, "Seq Scan") || strings.Contains(text, "Sort") ||
		!strings.Contains(text, "Index Scan using khala_threads_pkey on khala_threads t") ||
		!strings.Contains(text, "Index Scan using khala_event_seqs_pkey on khala_event_seqs s") {
		t.Errorf("the shared change does not take its rows by their keys, in order:\n%s", text)
	}
}

// Agents claiming and answering at once through two replicas: every
// answer is written once, with its thread's events numbered without
// gaps, however the changes shared statements.
func TestChangeBatchConcurrent(t *testing.T) {
	dsn := pgtest.Database(t)
	replicas := []*Store{openPG(t, dsn), openPG(t, dsn)}
	const threads = 120
	for range threads {
		khaladbtest.StartThread(t, replicas[0], "wf", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	}
	var mu sync.Mutex
	var answered []khaladb.Turn
	var wg sync.WaitGroup
	for a := range 8 {
		p := replicas[a%2]
		wg.Go(func() {
			for {
				ts, err := p.Claim(t.Context(), claimQuery(fmt.Sprintf("agent-%d", a), 1))
				if err != nil || len(ts) == 0 {
					if err != nil {
						t.Error(err)
					}
					return
				}
				tk := ts[0]
				err = answer(t, p, tk, nil)
				if err != nil {
					t.Errorf("answer %s: %v", tk.ID, err)
					return
				}
				mu.Lock()
				answered = append(answered, tk)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(answered) != threads {
		t.Fatalf("%d of %d answered", len(answered), threads)
	}
	checkAnswered(t, replicas[0], dsn, answered)
	for i, p := range replicas {
		t.Logf("replica %d: %+v, fast path %+v", i, p.ChangeStats(), p.FastPathStats())
	}
}

// What an answer costs the database by the answers a statement writes
// (the database's CPU, every backend's, per answer): why a replica's
// concurrent answers share statements.
//
//	go test ./khala/khaladb/khalapg -run '^$' -bench ChangeBatch -benchtime 1x
func BenchmarkChangeBatch(b *testing.B) {
	for _, size := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("answers=%d", size), func(b *testing.B) {
			p := openPG(b, pgtest.Database(b))
			const answers = 1200
			for b.Loop() {
				b.StopTimer()
				turns := claimedThreads(b, p, answers)
				b.StartTimer()
				cpu := pgtest.ServerCPU()
				for i := 0; i < answers; i += size {
					var errs []error
					if size == 1 {
						errs = []error{answer(b, p, turns[i], nil)}
					} else {
						errs = answerTogether(b, p, turns[i:i+size], nil)
					}
					if err := errors.Join(errs...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((pgtest.ServerCPU()-cpu).Microseconds())/answers, "db-cpu-us/answer")
			}
			if st := p.ChangeStats(); st.Changes != st.Statements*int64(size) {
				b.Fatalf("%+v: want %d answers a statement", st, size)
			}
		})
	}
}
