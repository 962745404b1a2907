package khala

import (
	"github.com/nerve-agents/nerve/khala/engine"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

func TestHandoff(t *testing.T) { eachBackend(t, testHandoff) }

// An agent waiting in a long poll when an answer queues a turn its
// filters take gets that turn from the answer's own commit: the trace
// shows it queued and started at one instant, its claim works like any
// other, and a waiter whose filters do not take the turn is left alone.
func testHandoff(t *testing.T, bk backend) {
	ts := bk.server(t)
	author, reviewer, other := ts.agent("author"), ts.agent("reviewer"), ts.agent("other")
	author.putWorkflow(pairWF)
	id := author.start("pair", map[string]any{"turns": 3}, "")
	first := author.claimOne()

	type result struct {
		turns []api.Turn
		took  time.Duration
	}
	poll := func(c *client, req map[string]any) <-chan result {
		ch := make(chan result, 1)
		go func() {
			start := time.Now()
			got := c.claim(req)
			ch <- result{got, time.Since(start)}
		}()
		return ch
	}
	// other waits for author turns only; reviewer for reviewer turns.
	otherGot := poll(other, map[string]any{"roles": []string{"author"}, "wait": "700ms"})
	reviewerGot := poll(reviewer, map[string]any{"roles": []string{"reviewer"}, "max": 2, "wait": "5s"})
	ts.waitParked(t, 2)
	if s, d := author.respond(first, "a change", nil); s != 200 {
		t.Fatalf("respond: %d %s", s, d)
	}
	r := <-reviewerGot
	if len(r.turns) != 1 || r.turns[0].Role != "reviewer" || r.turns[0].Step != 2 {
		t.Fatalf("reviewer's long poll: %+v", r.turns)
	}
	if o := <-otherGot; len(o.turns) != 0 || o.took < 600*time.Millisecond {
		t.Fatalf("a waiter whose filter does not take the turn got %+v after %s", o.turns, o.took)
	}
	var queued, started *workflow.Event
	for _, e := range reviewer.trace(id) {
		if e.Step == 2 && e.Type == engine.EventTurnQueued {
			queued = &e
		}
		if e.Step == 2 && e.Type == workflow.EventTurnStarted {
			started = &e
		}
	}
	if queued == nil || started == nil || !started.At.Equal(queued.At) || started.Agent != "reviewer" || started.Claim != r.turns[0].Claim {
		t.Fatalf("trace of the handed turn: queued %+v started %+v", queued, started)
	}
	th := reviewer.thread(id)
	for _, tt := range th.Turns {
		if tt.Step == 2 && (tt.State != khaladb.TurnClaimed || tt.Agent != "reviewer") {
			t.Fatalf("the handed turn is stored as %+v", tt)
		}
	}
	// The handed claim is a claim like any other: heartbeat and answer.
	reviewer.must("POST", "/v1/turns/"+r.turns[0].Turn+"/heartbeat", map[string]string{"claim": r.turns[0].Claim}, 200, nil)
	if s, d := reviewer.respond(r.turns[0], "looks good", nil); s != 200 {
		t.Fatalf("respond to a handed turn: %d %s", s, d)
	}
	// Nobody waits now: the next turn is queued, and claimed the usual way.
	third := author.claimOne()
	if third.Step != 3 || third.Role != "author" {
		t.Fatalf("third turn: %+v", third)
	}
}
