package khala

import (
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/workflow"
)

// A thread created while the sweeper sleeps out a long recheck still gets
// its idle event and webhook about when its deadline passes.
func TestIdleOnTimeAfterSweeperSlept(t *testing.T) {
	eachBackend(t, testIdleOnTimeAfterSweeperSlept)
}

// idleLimit is the idle limit of the workflow "lease" that sleepingSweeper
// publishes.
const idleLimit = 300 * time.Millisecond

// sleepingSweeper serves the workflow "lease" with a short idle limit and
// returns once the sweeper sleeps out a recheck of a minute, with nothing
// due: what comes next was not there when it went to sleep.
func sleepingSweeper(t *testing.T, bk backend) (*testServer, *client, *hookReceiver, string) {
	t.Helper()
	ts := bk.server(t, func(o *Options) { o.Recheck = time.Minute })
	a := ts.agent("a")
	src := leaseWF("1m", 3, idleLimit.String())
	a.putWorkflow(src)
	hook := newHookReceiver(t, 0)
	waitFor(t, "the sweeper to sleep", ts.srv.engine.Asleep)
	return ts, a, hook, src
}

func testIdleOnTimeAfterSweeperSlept(t *testing.T, bk backend) {
	_, a, hook, _ := sleepingSweeper(t, bk)

	started := time.Now()
	id := a.start("lease", nil, hook.URL)
	idleHookOnTime(t, hook, id, started.Add(idleLimit))
	if got := eventTypes(a.trace(id)); got != "thread.started turn.queued turn.idle" {
		t.Fatalf("trace: %s", got)
	}
}

// A turn queued where this server's handlers did not see it (another
// replica, which may have gone away since) wakes the sweeper through the
// queue's topic, so its idle deadline is not a recheck late.
func TestIdleOnTimeForATurnQueuedElsewhere(t *testing.T) {
	eachBackend(t, testIdleOnTimeForATurnQueuedElsewhere)
}

func testIdleOnTimeForATurnQueuedElsewhere(t *testing.T, bk backend) {
	ts, _, hook, src := sleepingSweeper(t, bk)

	// What another replica's POST /v1/workflows/lease/threads commits.
	ctx := t.Context()
	rec, err := ts.store.Workflow(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	def, err := workflow.ParseSource("lease.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// Another replica's engine: on the same store, sweeping nothing.
	elsewhere := engine.New(engine.Config{Store: ts.store})
	started := time.Now()
	th, err := elsewhere.Start(ctx, engine.StartRequest{Workflow: rec, Def: def, Input: map[string]any{}, Webhook: hook.URL, Initiator: "a"})
	if err != nil {
		t.Fatal(err)
	}
	idleHookOnTime(t, hook, th.ID, started.Add(idleLimit))
}

// idleHookOnTime waits, at most 5s past deadline, for thread id's idle
// webhook, and fails unless it came within a second of deadline.
func idleHookOnTime(t *testing.T, hook *hookReceiver, id string, deadline time.Time) {
	t.Helper()
	select {
	case p := <-hook.got:
		late := time.Since(deadline)
		if p.Event != engine.EventTurnIdle || p.Thread != id {
			t.Fatalf("webhook: %+v", p)
		}
		t.Logf("idle webhook %v after the deadline", late.Round(time.Millisecond))
		if late > time.Second {
			t.Fatalf("idle webhook %v after the deadline, want within 1s", late)
		}
	case <-time.After(time.Until(deadline) + 5*time.Second):
		t.Fatalf("no idle webhook within 5s of the deadline")
	}
}
