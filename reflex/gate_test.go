package reflex

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// clock is the gate's injected clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "nerve.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var rateLimited = &adapter.Error{Adapter: "claude", ExitStatus: 1, Reason: "exceeded retry limit, last status: 429 Too Many Requests"}

// Three rate-limited answers in a row pause the adapter for 30 s; each
// rate-limited answer after a pause doubles it, up to 30 min; a turn that
// started before the pause does not extend it; another kind of failure
// breaks the row but keeps the pause earned; the first success ends it.
func TestGateBackoff(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	g := NewGate(func() *config.Config { return config.Defaults(t.TempDir()) }, openStore(t), nil)
	g.Now = c.Now
	paused := func() time.Duration {
		t.Helper()
		h, _ := g.Check("claude")
		if h == nil {
			return 0
		}
		if h.Budget {
			t.Fatalf("a rate limit is no budget: %+v", h)
		}
		return h.Wait
	}
	g.Ended("claude", rateLimited)
	g.Ended("claude", &adapter.Error{Adapter: "claude", ExitStatus: 1, Reason: "command failed"})
	g.Ended("claude", rateLimited)
	g.Ended("claude", rateLimited)
	if w := paused(); w != 0 {
		t.Fatalf("paused for %s after a row of two", w)
	}
	g.Ended("claude", rateLimited)
	if w := paused(); w != FirstPause {
		t.Fatalf("after three in a row: paused %s, want %s", w, FirstPause)
	}
	c.add(10 * time.Second)
	g.Ended("claude", rateLimited) // started before the pause
	if w := paused(); w != 20*time.Second {
		t.Fatalf("a turn from before the pause moved it: %s left, want 20s", w)
	}
	want := FirstPause
	for i := 0; i < 8; i++ {
		c.add(paused())
		if w := paused(); w != 0 {
			t.Fatalf("still paused %s after the pause", w)
		}
		want = min(2*want, MaxPause)
		g.Ended("claude", rateLimited)
		if w := paused(); w != want {
			t.Fatalf("pause %d: %s, want %s", i+2, w, want)
		}
	}
	if want != MaxPause {
		t.Fatalf("the pause never reached its cap: %s", want)
	}
	c.add(MaxPause)
	g.Ended("claude", &adapter.Error{Adapter: "claude", ExitStatus: 1, Reason: "command failed"})
	g.Ended("claude", rateLimited)
	if w := paused(); w != MaxPause {
		t.Fatalf("a failure of another kind reset the back-off: %s", w)
	}
	c.add(MaxPause)
	g.Ended("claude", nil)
	for i := 0; i < 2; i++ {
		g.Ended("claude", rateLimited)
	}
	if w := paused(); w != 0 {
		t.Fatalf("a success did not end the back-off: paused %s", w)
	}
	st := g.States()
	if len(st) != 1 || st[0].Turns[OutcomeRateLimited] != 16 || st[0].Turns[OutcomeOK] != 1 || st[0].Turns[OutcomeFailed] != 2 || st[0].RateLimited != 2 {
		t.Fatalf("states %+v", st)
	}
}

// A local turn whose adapter is paused waits (it is not started, and not
// failed) and runs when the pause ends; one whose adapter is past a daily
// cap fails with kind budget without running.
func TestExecutorWaitsOutAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Defaults(t.TempDir())
		capped := 0.0
		cfg.Adapters["capped"] = config.Adapter{Type: "exec", Command: []string{"x"}, DailyUSD: &capped}
		cfg.Adapters["fake"] = config.Adapter{Type: "exec", Command: []string{"x"}}
		g := NewGate(func() *config.Config { return cfg }, openStore(t), nil)
		for i := 0; i < RateLimitsToPause; i++ {
			g.Ended("fake", rateLimited)
		}
		rec := newRecorder()
		runs := 0
		x := NewExecutor(Deps{Config: func() *config.Config { return cfg }, Home: t.TempDir(), Snapshots: rec, Procs: rec, Tracker: rec, Scratch: rec, Gate: g,
			NewAdapter: func(string, config.Adapter) (adapter.Adapter, error) {
				return &fakeAdapter{run: func(context.Context, adapter.Request) (*adapter.Result, error) {
					runs++
					return &adapter.Result{Content: "ok"}, nil
				}}, nil
			}})
		start := time.Now()
		a, ok := x.Run(context.Background(), &Turn{Thread: "thread-1", Key: "thread-1", Step: 1, Adapter: "fake"})
		if !ok || a.Error != nil || a.Content != "ok" || runs != 1 || time.Since(start) != FirstPause {
			t.Fatalf("answer %+v ok %v after %s, %d runs: want it run once, after the %s pause", a, ok, time.Since(start), runs, FirstPause)
		}
		if h, _ := g.Check("fake"); h != nil {
			t.Fatalf("still held after a success: %+v", h)
		}
		a, ok = x.Run(context.Background(), &Turn{Thread: "thread-1", Key: "thread-1", Step: 2, Adapter: "capped"})
		if !ok || a.Error == nil || a.Error.Kind != KindBudget || runs != 1 || rec.started != 1 {
			t.Fatalf("a capped adapter's turn: %+v (runs %d, started %d), want kind budget and no run", a.Error, runs, rec.started)
		}
	})
}

// A daily cap is reached by the answers charged today and lifts at 00:00
// UTC by the clock, or at once when nerve.yaml raises it.
func TestGateDailyCap(t *testing.T) {
	st := openStore(t)
	cfg := config.Defaults(t.TempDir())
	usd, tokens := 1.0, int64(5000)
	cfg.Adapters["claude"] = config.Adapter{DailyUSD: &usd}
	cfg.Adapters["codex"] = config.Adapter{DailyTokens: &tokens}
	var mu sync.Mutex
	current := cfg
	g := NewGate(func() *config.Config { mu.Lock(); defer mu.Unlock(); return current }, st, nil)
	c := &clock{t: time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)}
	g.Now = c.Now
	th := &workflow.Thread{Workflow: "w", Status: workflow.StatusRunning}
	if err := st.CreateThread(th); err != nil {
		t.Fatal(err)
	}
	answer := func(step int, adapterName string, u usage.Usage) {
		t.Helper()
		m := workflow.Message{Step: step, Adapter: adapterName, At: c.Now(), Usage: &u}
		if err := st.Commit(workflow.Update{Thread: th, Messages: []workflow.Message{m}}); err != nil {
			t.Fatal(err)
		}
	}
	answer(1, "claude", usage.Usage{CostUSD: usage.Float(0.75)})
	answer(2, "codex", usage.Usage{InputTokens: usage.Int(4000), OutputTokens: usage.Int(999)})
	for _, n := range []string{"claude", "codex"} {
		if h, _ := g.Check(n); h != nil {
			t.Fatalf("%s held below its cap: %+v", n, h)
		}
	}
	answer(3, "claude", usage.Usage{CostUSD: usage.Float(0.5)})
	answer(4, "codex", usage.Usage{OutputTokens: usage.Int(1)})
	h, changed := g.Check("claude")
	if h == nil || !h.Budget || h.Wait != 2*time.Hour || h.Reason != "budget: adapter claude reached its daily cap ($1.25 spent of $1.00 today, UTC); it starts no turn until 00:00 UTC" {
		t.Fatalf("claude past its cap: %+v", h)
	}
	if h, _ := g.Check("codex"); h == nil || !h.Budget {
		t.Fatalf("codex at its token cap: %+v", h)
	}
	if err := g.Wait(context.Background(), "claude"); err == nil || err.Error() != h.Reason {
		t.Fatalf("Wait past a cap: %v", err)
	}

	raised := config.Defaults(cfg.Home)
	more := 2.0
	raised.Adapters["claude"] = config.Adapter{DailyUSD: &more}
	mu.Lock()
	current = raised
	mu.Unlock()
	g.Changed()
	select {
	case <-changed:
	default:
		t.Fatal("a reload did not wake those held back")
	}
	if h, _ := g.Check("claude"); h != nil {
		t.Fatalf("held after the cap was raised: %+v", h)
	}
	mu.Lock()
	current = cfg
	mu.Unlock()
	c.add(2*time.Hour - time.Nanosecond)
	if h, _ := g.Check("codex"); h == nil {
		t.Fatal("codex let go before midnight")
	}
	c.add(time.Nanosecond)
	for _, n := range []string{"claude", "codex"} {
		if h, _ := g.Check(n); h != nil {
			t.Fatalf("%s still held at 00:00 UTC: %+v", n, h)
		}
	}
	if s := g.States(); len(s) != 2 || s[0].Day != "2026-11-26" || s[0].Spent != (store.Spend{}) {
		t.Fatalf("states on the new day: %+v", s)
	}
}

// BenchmarkGate is what the gate adds to a turn: the check before it (a
// capped adapter reads today's spend from nerve.db) and the report after.
func BenchmarkGate(b *testing.B) {
	st, err := store.Open(filepath.Join(b.TempDir(), "nerve.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg := config.Defaults(b.TempDir())
	usd := 1e9
	cfg.Adapters["capped"] = config.Adapter{Type: "claude", DailyUSD: &usd}
	th := &workflow.Thread{Workflow: "w", Status: workflow.StatusRunning}
	st.CreateThread(th)
	for i, n := range []string{"capped", "claude", "codex"} {
		m := workflow.Message{Step: i + 1, Adapter: n, At: time.Now(), Usage: &usage.Usage{CostUSD: usage.Float(1), InputTokens: usage.Int(10)}}
		st.Commit(workflow.Update{Thread: th, Messages: []workflow.Message{m}})
	}
	g := NewGate(func() *config.Config { return cfg }, st, nil)
	for _, name := range []string{"uncapped", "capped"} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := g.Wait(context.Background(), name); err != nil {
					b.Fatal(err)
				}
				g.Ended(name, nil)
			}
		})
	}
}
