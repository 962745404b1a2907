package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/sense"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// testClock is the gate's injected clock. Moving it wakes whoever waits on
// a hold, as the hold's own timer would have when that time came.
type testClock struct {
	mu   sync.Mutex
	t    time.Time
	gate *reflex.Gate
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	c.gate.Changed()
}

// newGatedDaemon is a daemon's runner, store and gate (with an injected
// clock) over a fresh NERVE_HOME, without its socket.
func newGatedDaemon(t *testing.T, cfg *config.Config) (*Daemon, *testClock) {
	t.Helper()
	st, err := store.Open(config.Paths{Home: cfg.Home}.DB(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{paths: config.Paths{Home: cfg.Home}, log: slog.New(slog.DiscardHandler), store: st, cfg: cfg,
		capacity: sense.NewCapacity(cfg.Agent.MaxConcurrentTurns)}
	d.gate = reflex.NewGate(d.config, st, d.log)
	c := &testClock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), gate: d.gate}
	d.gate.Now = c.Now
	ctx, cancel := context.WithCancel(context.Background())
	d.runner = newRunner(d, ctx)
	t.Cleanup(func() { cancel(); d.runner.wait(); st.Close() })
	return d, c
}

// testStatus is the one adapter `daemon status` shows.
func (d *Daemon) testStatus(t *testing.T) AdapterStatus {
	t.Helper()
	rec := httptest.NewRecorder()
	d.routes().ServeHTTP(rec, httptest.NewRequest("GET", "http://"+apiHost+"/v1/status", nil))
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || len(st.Adapters) > 1 {
		t.Fatalf("status: %v\n%s", err, rec.Body)
	}
	if len(st.Adapters) == 0 {
		return AdapterStatus{} // no turn ended yet
	}
	return st.Adapters[0]
}

// An exec agent that prints a 429 three times in a row pauses its
// adapter: the thread's next turn waits (not started, not failed) for
// 30 s, then 60 s after another 429, and the adapter resumes on the first
// success. daemon status and /metrics (scraped over HTTP) show the pause.
func TestBackoffWithAFakeAgent(t *testing.T) {
	home := t.TempDir()
	limited := filepath.Join(home, "limited")
	runs := filepath.Join(home, "runs.log")
	script := filepath.Join(home, "agent.sh")
	os.WriteFile(limited, nil, 0o600)
	os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
echo "$NERVE_STEP" >> %s
if [ -f %s ]; then echo "Error: 429 Too Many Requests: rate limit exceeded, retry later" >&2; exit 1; fi
echo "answer $NERVE_STEP"
`, runs, limited)), 0o700)
	cfg := config.Defaults(home)
	cfg.Adapters["flaky"] = config.Adapter{Type: "exec", Command: []string{script}}
	// Unsandboxed: the agent counts its runs in NERVE_HOME and reads its
	// switch there, which the sandbox hides by design.
	cfg.Daemon.Sandbox = "none"
	d, clock := newGatedDaemon(t, cfg)
	addr, stop, err := d.serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	def, err := workflow.Parse("flaky.yaml", []byte(`workflow: flaky
moderator: '$count(messages) < 6 ? {"role": "w", "instruction": "go"} : {"done": true, "result": messages.(error ? "limited" : content)}'
roles:
  w: {adapter: flaky, prompt: work}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	th, err := d.runner.start(context.Background(), def, threadSpec{Workdir: home})
	if err != nil {
		t.Fatal(err)
	}
	ran := func() int { b, _ := os.ReadFile(runs); return strings.Count(string(b), "\n") }
	waitPaused := func(n int, pause time.Duration) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("a paused adapter after %d runs", n), func() bool {
			a := d.testStatus(t)
			return a.State == "paused" && a.WaitingTurns == 1 && a.PausedUntil != nil && a.PausedUntil.Equal(clock.Now().Add(pause))
		})
		if got := ran(); got != n {
			t.Fatalf("the agent ran %d times, want %d: a paused adapter starts no turn", got, n)
		}
		if act := d.runner.activeCount(); act != 0 {
			t.Fatalf("%d active turns while paused: a waiting turn is not running", act)
		}
	}
	waitPaused(3, reflex.FirstPause)
	metrics := scrape(t, addr)
	for _, want := range []string{`nerve_adapter_paused{adapter="flaky"} 1`, `nerve_adapter_pause_seconds{adapter="flaky"} 30`,
		`nerve_adapter_rate_limited_in_a_row{adapter="flaky"} 3`, `nerve_adapter_waiting_turns{adapter="flaky"} 1`,
		`nerve_turns_total{adapter="flaky",outcome="rate_limited"} 3`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
		}
	}

	clock.add(reflex.FirstPause) // the waiting turn runs, and is limited again
	waitPaused(4, 2*reflex.FirstPause)
	os.Remove(limited)
	clock.add(2 * reflex.FirstPause)
	waitUntil(t, "the thread to end", func() bool {
		got, err := d.store.Thread(th.ID)
		return err == nil && got.Ended()
	})
	got, _ := d.store.Thread(th.ID)
	if res, _ := json.Marshal(got.Result); string(res) != `["limited","limited","limited","limited","answer 5","answer 6"]` {
		t.Fatalf("thread %s ended with %s", got.Status, res)
	}
	if a := d.testStatus(t); a.State != "ok" || a.PausedUntil != nil || a.RateLimited != 0 || a.Turns["ok"] != 2 {
		t.Fatalf("after a success: %+v", a)
	}
	if m := scrape(t, addr); !strings.Contains(m, `nerve_adapter_paused{adapter="flaky"} 0`+"\n") {
		t.Fatalf("/metrics after the pause:\n%s", m)
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return string(b)
}

// The khala sense claims nothing for an adapter past its daily cap while
// a turn waits on the remote; when the cap is raised (a reload) it claims.
func TestKhalaSenseHoldsClaimsPastACap(t *testing.T) {
	ctx := context.Background()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	kdb := filepath.Join(t.TempDir(), "khala.db")
	runKhala(t, addr, kdb)
	tok, _, err := khala.IssueToken(ctx, kdb, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl := remote.New("origin", "http://"+addr, "")
	if cl.Token, err = cl.Enroll(ctx, tok.Token, "capped-agent"); err != nil {
		t.Fatal(err)
	}
	src := "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nbinding: cloud\nroles:\n  w: {prompt: p}\n"
	if _, err := cl.PutWorkflow(ctx, "one", []byte(src)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.StartThread(ctx, "one", nil, ""); err != nil {
		t.Fatal(err)
	}

	cfg := config.Defaults(t.TempDir())
	zero := 0.0
	cfg.Adapters["claude"] = config.Adapter{DailyUSD: &zero}
	d, _ := newGatedDaemon(t, cfg)
	s := sense.NewKhala("origin-turns", cl, d.capacity, nil, nil, d.log)
	s.Adapter, s.Gate = "claude", d.gate
	claimed := make(chan api.Turn, 1)
	sctx, stopSense := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(sctx, func(sig reflex.Signal) { claimed <- sig.Turn; sig.Done() })
	}()
	defer func() { stopSense(); <-done }()
	waitUntil(t, "the sense to hold its claims", func() bool { return strings.HasPrefix(s.State(), "holding claims: budget: adapter claude") })
	select {
	case tt := <-claimed:
		t.Fatalf("claimed %s for an adapter past its cap", tt.Turn)
	case <-time.After(300 * time.Millisecond):
	}
	if used, _ := d.capacity.Used(); used != 0 {
		t.Fatalf("%d slots taken while held", used)
	}

	raised := config.Defaults(cfg.Home)
	d.mu.Lock()
	d.cfg = raised
	d.mu.Unlock()
	d.gate.Changed()
	select {
	case tt := <-claimed:
		if err := cl.Release(ctx, tt.Turn, tt.Claim); err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no claim once the cap was lifted; sense %s", s.State())
	}
}
