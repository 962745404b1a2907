package khala

import (
	"encoding/json"
	"fmt"
	"github.com/nerve-agents/nerve/khala/engine"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// pgReplicas starts n servers over one fresh PostgreSQL database, each
// with its own store, as n replicas behind a load balancer would be.
func pgReplicas(t *testing.T, n int, tune ...func(*Options)) []*testServer {
	t.Helper()
	first := pgBackend.server(t, tune...)
	out := []*testServer{first}
	for range n - 1 {
		ts := newServerOn(t, first.reopen(t), tune...)
		ts.enroll, ts.reopen = first.enroll, first.reopen
		out = append(out, ts)
	}
	return out
}

// via is c talking to another replica.
func (c *client) via(ts *testServer) *client { return &client{ts: ts, name: c.name, token: c.token} }

// A thread created on one replica, claimed through the second, answered
// through the third; the wake-up crosses replicas by NOTIFY (the periodic
// re-check is a minute here), and trace and event stream read the same
// on every replica.
func TestPostgresReplicas(t *testing.T) {
	rs := pgReplicas(t, 3, func(o *Options) { o.Recheck = time.Minute })
	a := rs[0].agent("a")
	b := rs[1].agent("b")
	a.putWorkflow(pairWF)
	polled := make(chan []api.Turn, 1)
	go func() { polled <- b.claim(map[string]any{"wait": "10s"}) }()
	rs[1].waitParked(t, 1) // b waits on replica 1
	id := a.start("pair", nil, "")
	queued := time.Now()
	got := <-polled
	woke := time.Since(queued)
	if len(got) != 1 || got[0].Thread != id {
		t.Fatalf("claim through replica 1: %+v", got)
	}
	if woke > time.Second {
		t.Fatalf("the long poll on replica 1 woke %s after the turn was queued on replica 0", woke)
	}
	t.Logf("a turn queued on replica 0 reached a long poll on replica 1 after %s", woke)
	stream := readSSE(t, a.via(rs[1]), id, "")
	if s, d := b.via(rs[2]).respond(got[0], "answered on replica 2", nil); s != 200 {
		t.Fatalf("respond through replica 2: %d %s", s, d)
	}
	t2 := a.via(rs[2]).claimOne()
	if s, d := a.via(rs[0]).respond(t2, "done", nil); s != 200 || !strings.Contains(string(d), "completed") {
		t.Fatalf("respond through replica 0: %d %s", s, d)
	}
	live := collect(t, stream)
	traces := make([]string, 3)
	for i, r := range rs {
		evs := a.via(r).trace(id)
		traces[i] = fmt.Sprint(evs)
		if i == 1 && fmt.Sprint(live) != fmt.Sprint(evs) {
			t.Fatalf("the stream on replica 1 differs from its trace:\n%v\n%v", live, evs)
		}
	}
	if traces[0] != traces[1] || traces[1] != traces[2] {
		t.Fatalf("traces differ between replicas:\n%s\n%s\n%s", traces[0], traces[1], traces[2])
	}
	var msgs []workflow.Message
	b.via(rs[1]).must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 2 || msgs[0].Content != "answered on replica 2" || msgs[0].Agent != "b" {
		t.Fatalf("messages: %+v", msgs)
	}
}

// Parallel turns answered at once through two replicas: each thread's
// moderator runs once, after both answers, whatever the interleaving; a
// heartbeat storm on a third replica only makes answers retry.
func TestPostgresModeratorRunsOnce(t *testing.T) {
	rs := pgReplicas(t, 3)
	a, b := rs[0].agent("a"), rs[0].agent("b")
	a.putWorkflow(panelWF)
	for range 15 {
		id := a.start("panel", nil, "")
		ta := a.via(rs[1]).claim(map[string]any{"roles": []string{"a"}})
		tb := b.via(rs[2]).claim(map[string]any{"roles": []string{"b"}})
		if len(ta) != 1 || len(tb) != 1 {
			t.Fatalf("claims: %+v %+v", ta, tb)
		}
		stop := make(chan struct{})
		var beats sync.WaitGroup
		beats.Add(1)
		go func() {
			defer beats.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a.via(rs[0]).do("POST", "/v1/turns/"+ta[0].Turn+"/heartbeat", map[string]string{"claim": ta[0].Claim})
			}
		}()
		var wg sync.WaitGroup
		codes := make([]int, 2)
		wg.Add(2)
		go func() { defer wg.Done(); codes[0], _ = a.via(rs[1]).respond(ta[0], "A", nil) }()
		go func() { defer wg.Done(); codes[1], _ = b.via(rs[2]).respond(tb[0], "B", nil) }()
		wg.Wait()
		close(stop)
		beats.Wait()
		if codes[0] != 200 || codes[1] != 200 {
			t.Fatalf("answers: %v", codes)
		}
		th := a.thread(id)
		if got, _ := th.Result.([]any); th.Status != workflow.StatusCompleted || len(got) != 2 || got[0] != "A" || got[1] != "B" {
			t.Fatalf("thread %s: %s %#v", id, th.Status, th.Result)
		}
		evs := a.trace(id)
		if n := strings.Count(eventTypes(evs), workflow.EventThreadEnded); n != 1 {
			t.Fatalf("%d thread.ended events: %s", n, eventTypes(evs))
		}
		for i, e := range evs {
			if e.Seq != uint64(i+1) {
				t.Fatalf("event numbers are not 1..n: %s", fmt.Sprint(evs))
			}
		}
	}
}

// Three replicas sweep the same leases and idle deadlines: each expiry and
// each idle turn is acted on once, and each webhook delivered once.
func TestPostgresSweepOncePerEvent(t *testing.T) {
	rs := pgReplicas(t, 3, fastBackoff, func(o *Options) { o.Recheck = 50 * time.Millisecond })
	a := rs[0].agent("a")
	a.putWorkflow(leaseWF("200ms", 3, "0s"))
	hook := newHookReceiver(t, 0)
	id := a.start("lease", nil, hook.URL)
	for i := range 3 {
		got := a.via(rs[i]).claim(map[string]any{"wait": "5s"})
		if len(got) != 1 || got[0].Attempt != i+1 {
			t.Fatalf("attempt %d: %+v", i+1, got)
		}
	}
	waitFor(t, "the thread to fail", func() bool { return a.thread(id).Status == workflow.StatusFailed })
	want := "thread.started turn.queued turn.started turn.expired turn.started turn.expired turn.started turn.expired thread.ended"
	if got := eventTypes(a.trace(id)); got != want {
		t.Fatalf("trace:\n got %s\nwant %s", got, want)
	}
	if p := hook.next(t); p.Event != workflow.EventThreadEnded {
		t.Fatalf("webhook: %+v", p)
	}

	a.putWorkflow(leaseWF("1m", 3, "150ms"))
	idleHook := newHookReceiver(t, 1) // the first attempt fails: the retry is once too
	id = a.start("lease", nil, idleHook.URL)
	if p := idleHook.next(t); p.Event != engine.EventTurnIdle {
		t.Fatalf("idle webhook: %+v", p)
	}
	time.Sleep(500 * time.Millisecond)
	if got := eventTypes(a.trace(id)); got != "thread.started turn.queued turn.idle" {
		t.Fatalf("trace: %s", got)
	}
	for _, h := range []*hookReceiver{hook, idleHook} {
		h.mu.Lock()
		for delivery, n := range h.delivered {
			if n > 1 && h != idleHook || n > 2 {
				t.Errorf("delivery %s made %d times", delivery, n)
			}
		}
		if len(h.delivered) != 1 {
			t.Errorf("%d deliveries, want 1: %v", len(h.delivered), h.delivered)
		}
		h.mu.Unlock()
	}
}

// Agents on three replicas claim up to four turns at a time from many
// threads at once: every turn goes to one agent, once, and no claim or
// answer fails (the lock order leaves no room for a deadlock).
func TestPostgresClaimContention(t *testing.T) {
	rs := pgReplicas(t, 3)
	first := rs[0].agent("agent-0")
	first.putWorkflow(panelWF)
	const threads = 60
	for range threads {
		first.start("panel", nil, "")
	}
	var (
		mu      sync.Mutex
		claimed = map[string]string{} // turn -> claim
		done    atomic.Int64
		wg      sync.WaitGroup
	)
	for i := range 12 {
		c := rs[0].agent(fmt.Sprintf("agent-%d", i+1)).via(rs[i%3])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < 2*threads {
				s, d := c.do("POST", "/v1/turns/claim", map[string]any{"max": 1 + i%4, "wait": "200ms"})
				var got []api.Turn
				if s != 200 || json.Unmarshal(d, &got) != nil {
					t.Errorf("claim: %d %s", s, d)
					return
				}
				for _, tk := range got {
					mu.Lock()
					prev, twice := claimed[tk.Turn]
					claimed[tk.Turn] = tk.Claim
					mu.Unlock()
					if twice {
						t.Errorf("turn %s claimed twice (%s, then %s)", tk.Turn, prev, tk.Claim)
					}
					if s, d := c.respond(tk, "ok", nil); s != 200 {
						t.Errorf("respond %s: %d %s", tk.Turn, s, d)
					}
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if len(claimed) != 2*threads {
		t.Fatalf("%d turns claimed, want %d", len(claimed), 2*threads)
	}
	var running []threadJSON
	first.must("GET", "/v1/threads?status=running", nil, 200, &running)
	if len(running) != 0 {
		t.Fatalf("%d threads still running", len(running))
	}
}
