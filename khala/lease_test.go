package khala

import (
	"fmt"
	"github.com/nerve-agents/nerve/khala/engine"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// Fifty agents race for one turn, long-polling before it exists and
// claiming all at once after: exactly one wins each time.
func TestFiftyAgentsRace(t *testing.T) { eachBackend(t, testFiftyAgentsRace) }

func testFiftyAgentsRace(t *testing.T, bk backend) {
	ts := bk.server(t)
	agents := make([]*client, 50)
	for i := range agents {
		agents[i] = ts.agent(fmt.Sprintf("agent-%02d", i))
	}
	agents[0].putWorkflow(pairWF)

	race := func(wait string, before func()) {
		t.Helper()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			won   []api.Turn
			ready sync.WaitGroup
		)
		ready.Add(len(agents))
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				got := a.claim(map[string]any{"max": 1, "wait": wait})
				mu.Lock()
				won = append(won, got...)
				mu.Unlock()
			}()
		}
		ready.Wait()
		before()
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("wait %s: %d agents won the turn: %+v", wait, len(won), won)
		}
	}
	// Long polls waiting when the turn is queued.
	race("2s", func() {
		ts.waitParked(t, len(agents))
		agents[0].start("pair", nil, "")
	})
	// A turn already queued, fifty claims without waiting.
	agents[0].start("pair", nil, "")
	race("0s", func() {})
	// Long polls waiting when an answer queues the next turn: it is
	// handed to one of them in the answer's own commit.
	agents[0].start("pair", nil, "")
	first := agents[0].claimOne()
	race("2s", func() {
		ts.waitParked(t, len(agents))
		if s, d := agents[0].respond(first, "done", nil); s != 200 {
			t.Fatalf("respond: %d %s", s, d)
		}
	})
}

func TestStaleClaim(t *testing.T) { eachBackend(t, testStaleClaim) }

func testStaleClaim(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	ta := a.claimOne()
	// a gives the turn back; b takes it: a's claim is stale.
	a.must("POST", "/v1/turns/"+ta.Turn+"/release", map[string]string{"claim": ta.Claim}, 200, nil)
	tb := b.claimOne()
	if tb.Turn != ta.Turn || tb.Claim == ta.Claim || tb.Attempt != 1 {
		t.Fatalf("re-claim: %+v after %+v", tb, ta)
	}
	for _, ep := range []string{"heartbeat", "response", "release"} {
		s, d := a.do("POST", "/v1/turns/"+ta.Turn+"/"+ep, map[string]string{"claim": ta.Claim, "content": "late"})
		if s != 409 || errCode(d) != codeClaimLost {
			t.Fatalf("%s with a stale claim: %d %s", ep, s, d)
		}
	}
	// A made-up claim is stale too.
	if s, _ := a.do("POST", "/v1/turns/"+ta.Turn+"/response", map[string]string{"claim": "0123"}); s != 409 {
		t.Fatalf("made-up claim: %d", s)
	}
	// Nothing changed: no message, b still holds the turn.
	if th := a.thread(id); th.Step != 1 || len(th.Turns) != 1 || th.Turns[0].Agent != "b" || th.Turns[0].State != khaladb.TurnClaimed {
		t.Fatalf("after stale answers: %+v %+v", th.Thread, th.Turns)
	}
	var msgs []workflow.Message
	a.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 0 {
		t.Fatalf("a stale response was recorded: %+v", msgs)
	}
	if s, d := b.respond(tb, "b's work", nil); s != 200 {
		t.Fatalf("holder's response: %d %s", s, d)
	}
	// After the answer, the old holder's claim stays refused.
	if s, _ := a.respond(ta, "late", nil); s != 409 {
		t.Fatalf("stale after answer: %d", s)
	}
}

func TestLeaseExpiryRequeues(t *testing.T) { eachBackend(t, testLeaseExpiryRequeues) }

func testLeaseExpiryRequeues(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(leaseWF("300ms", 3, "0s"))
	id := a.start("lease", nil, "")
	ta := a.claimOne()
	// Heartbeats keep the lease past its first expiry.
	for range 4 {
		time.Sleep(120 * time.Millisecond)
		a.must("POST", "/v1/turns/"+ta.Turn+"/heartbeat", map[string]string{"claim": ta.Claim}, 200, nil)
	}
	if got := b.claim(map[string]any{}); len(got) != 0 {
		t.Fatalf("a heartbeated lease was re-queued: %+v", got)
	}
	// Then a stops heartbeating: b's long poll gets the turn, attempt 2.
	start := time.Now()
	tb := b.claim(map[string]any{"wait": "5s"})
	if len(tb) != 1 || tb[0].Turn != ta.Turn || tb[0].Attempt != 2 {
		t.Fatalf("after expiry: %+v", tb)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("re-queued %s after the last heartbeat; the lease is 300ms", d)
	}
	s, d := a.do("POST", "/v1/turns/"+ta.Turn+"/heartbeat", map[string]string{"claim": ta.Claim})
	if s != 409 || errCode(d) != codeClaimLost {
		t.Fatalf("expired holder's heartbeat: %d %s", s, d)
	}
	if s, _ := a.respond(ta, "late", nil); s != 409 {
		t.Fatalf("expired holder's response: %d", s)
	}
	if s, d := b.respond(tb[0], "done", nil); s != 200 || !strings.Contains(string(d), "completed") {
		t.Fatalf("new holder: %d %s", s, d)
	}
	evs := a.trace(id)
	var expired *workflow.Event
	for i := range evs {
		if evs[i].Type == engine.EventTurnExpired {
			expired = &evs[i]
		}
	}
	if expired == nil || expired.Agent != "a" || expired.Claim != ta.Claim || expired.Attempt != 1 {
		t.Fatalf("no turn.expired event for a's lease: %s", eventTypes(evs))
	}
}

func TestLeaseExpiredWithoutSweep(t *testing.T) { eachBackend(t, testLeaseExpiredWithoutSweep) }

func testLeaseExpiredWithoutSweep(t *testing.T, bk backend) {
	// A lease is lost at its expiry even before the sweeper re-queues it.
	var skew atomic.Int64
	ts := bk.server(t, func(o *Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	a := ts.agent("a")
	a.putWorkflow(leaseWF("1m", 3, "0s"))
	a.start("lease", nil, "")
	tk := a.claimOne()
	skew.Store(int64(time.Hour)) // the sweeper sleeps on: its timer is for the real minute
	for _, ep := range []string{"response", "heartbeat", "release"} {
		if s, _ := a.do("POST", "/v1/turns/"+tk.Turn+"/"+ep, map[string]string{"claim": tk.Claim}); s != 409 {
			t.Fatalf("%s after expiry: %d", ep, s)
		}
	}
}

func TestMaxAttemptsFailsThread(t *testing.T) { eachBackend(t, testMaxAttemptsFailsThread) }

func testMaxAttemptsFailsThread(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(leaseWF("200ms", 2, "0s"))
	hook := newHookReceiver(t, 0)
	id := a.start("lease", nil, hook.URL)
	first := a.claimOne()
	second := a.claim(map[string]any{"wait": "5s"})
	if len(second) != 1 || second[0].Attempt != 2 || second[0].Claim == first.Claim {
		t.Fatalf("second attempt: %+v", second)
	}
	waitFor(t, "the thread to fail", func() bool { return a.thread(id).Status == workflow.StatusFailed })
	th := a.thread(id)
	if !strings.Contains(th.Error, "max_attempts 2") || !strings.Contains(th.Error, id+".1") {
		t.Fatalf("error: %q", th.Error)
	}
	if got := eventTypes(a.trace(id)); got != "thread.started turn.queued turn.started turn.expired turn.started turn.expired thread.ended" {
		t.Fatalf("trace: %s", got)
	}
	p := hook.next(t)
	if p.Event != workflow.EventThreadEnded || p.Status != workflow.StatusFailed || p.Thread != id || p.Error != th.Error {
		t.Fatalf("webhook: %+v", p)
	}
	// The failed turn is not handed out again.
	if got := a.claim(map[string]any{"wait": "300ms"}); len(got) != 0 {
		t.Fatalf("claim after failure: %+v", got)
	}
}

func TestCancel(t *testing.T) { eachBackend(t, testCancel) }

func testCancel(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(panelWF)
	hook := newHookReceiver(t, 0)
	id := a.start("panel", nil, hook.URL)
	tk := b.claim(map[string]any{"max": 1})[0] // one claimed, one still queued
	var out map[string]string
	a.must("POST", "/v1/threads/"+id+"/cancel", nil, 200, &out)
	if out["status"] != workflow.StatusCancelled {
		t.Fatalf("cancel: %+v", out)
	}
	var hb struct {
		Cancel bool `json:"cancel"`
	}
	b.must("POST", "/v1/turns/"+tk.Turn+"/heartbeat", map[string]string{"claim": tk.Claim}, 200, &hb)
	if !hb.Cancel {
		t.Fatal("heartbeat after cancel did not say cancel: true")
	}
	if s, d := b.respond(tk, "too late", nil); s != 409 || errCode(d) != codeClaimLost {
		t.Fatalf("response after cancel: %d %s", s, d)
	}
	if got := b.claim(map[string]any{"max": 5}); len(got) != 0 {
		t.Fatalf("a cancelled thread's turn was handed out: %+v", got)
	}
	s, d := a.do("POST", "/v1/threads/"+id+"/cancel", nil)
	if s != 409 || errCode(d) != codeThreadEnded {
		t.Fatalf("second cancel: %d %s", s, d)
	}
	th := a.thread(id)
	if th.Status != workflow.StatusCancelled || th.Error != "cancelled by a" || len(th.Turns) != 0 {
		t.Fatalf("thread: %+v", th.Thread)
	}
	if p := hook.next(t); p.Status != workflow.StatusCancelled {
		t.Fatalf("webhook: %+v", p)
	}
}

func TestIdleNotifies(t *testing.T) { eachBackend(t, testIdleNotifies) }

func testIdleNotifies(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(leaseWF("1m", 3, "150ms"))
	hook := newHookReceiver(t, 0)
	id := a.start("lease", nil, hook.URL)
	p := hook.next(t)
	if p.Event != engine.EventTurnIdle || p.Thread != id || p.Workflow != "lease" || p.Step != 1 || p.Role != "worker" || p.Status != workflow.StatusRunning {
		t.Fatalf("idle webhook: %+v", p)
	}
	// Raised once; the turn stays queued.
	time.Sleep(300 * time.Millisecond)
	if got := eventTypes(a.trace(id)); got != "thread.started turn.queued turn.idle" {
		t.Fatalf("trace: %s", got)
	}
	tk := a.claimOne()
	if s, _ := a.respond(tk, "ok", nil); s != 200 {
		t.Fatal("respond")
	}
	if p := hook.next(t); p.Event != workflow.EventThreadEnded || p.Status != workflow.StatusCompleted {
		t.Fatalf("end webhook: %+v", p)
	}
}
