package khala

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// The answer's fast path on PostgreSQL: an answer through the replica that
// handed out its turn is written from the claim's view, and a view that
// moved in between (a heartbeat, a cancel, an answer through another
// replica) is found stale and the answer is made from a locked read, with
// the same outcome as without the view.
func TestPostgresFastPath(t *testing.T) {
	rs := pgReplicas(t, 2)
	pgs := []*khalapg.Store{rs[0].store.(*khalapg.Store), rs[1].store.(*khalapg.Store)}
	counts := func() string {
		return fmt.Sprintf("fast %d/%d, stale %d/%d", pgs[0].FastPathStats().Fast, pgs[1].FastPathStats().Fast,
			pgs[0].FastPathStats().Stale, pgs[1].FastPathStats().Stale)
	}
	a := rs[0].agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", map[string]any{"turns": 6}, "")

	// Turns 1 and 2: claimed and answered through replica 0.
	for i := 1; i <= 2; i++ {
		if s, d := a.respond(a.claimOne(), fmt.Sprint("answer ", i), nil); s != 200 {
			t.Fatalf("answer %d: %d %s", i, s, d)
		}
	}
	if got := counts(); got != "fast 2/0, stale 0/0" {
		t.Fatalf("two answers through the claiming replica: %s", got)
	}

	// Turn 3: a heartbeat through replica 1 moves the turn after the claim.
	tk := a.claimOne()
	a.via(rs[1]).must("POST", "/v1/turns/"+tk.Turn+"/heartbeat", map[string]string{"claim": tk.Claim}, 200, nil)
	if s, d := a.respond(tk, "answer 3", nil); s != 200 {
		t.Fatalf("answer 3: %d %s", s, d)
	}
	if got := counts(); got != "fast 2/0, stale 1/0" {
		t.Fatalf("after a heartbeat elsewhere: %s", got)
	}

	// Turn 4: claimed through replica 0, answered through replica 1 (no
	// view there), then resent through replica 0, whose view is stale:
	// acknowledged again, recorded once.
	tk = a.claimOne()
	if s, d := a.via(rs[1]).respond(tk, "answer 4", nil); s != 200 {
		t.Fatalf("answer 4: %d %s", s, d)
	}
	if s, d := a.respond(tk, "answer 4", nil); s != 200 {
		t.Fatalf("answer 4 resent: %d %s", s, d)
	}
	if got := counts(); got != "fast 2/0, stale 2/0" {
		t.Fatalf("after an answer elsewhere: %s", got)
	}

	// Turn 5: the thread is cancelled through replica 1 after the claim.
	tk = a.claimOne()
	a.via(rs[1]).must("POST", "/v1/threads/"+id+"/cancel", nil, 200, nil)
	if s, d := a.respond(tk, "too late", nil); s != 409 || errCode(d) != codeClaimLost {
		t.Fatalf("answer after cancel: %d %s", s, d)
	}
	var msgs []workflow.Message
	a.via(rs[1]).must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, m.Content)
	}
	if fmt.Sprint(contents) != "[answer 1 answer 2 answer 3 answer 4]" {
		t.Fatalf("messages: %q", contents)
	}
	if th := a.thread(id); th.Status != workflow.StatusCancelled {
		t.Fatalf("thread %s, want cancelled", th.Status)
	}
	// The refused answer found its view stale (the cancel moved the
	// thread) rather than writing anything.
	if got := counts(); got != "fast 2/0, stale 3/0" {
		t.Fatalf("after a cancel elsewhere: %s", got)
	}
}

// A claim of a thread with other open turns (parallel ones) keeps no view:
// their state is not in it.
func TestPostgresFastPathParallel(t *testing.T) {
	ts := pgBackend.server(t)
	pg := ts.store.(*khalapg.Store)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(panelWF)
	// Each turn is answered by the agent that claimed it.
	type held struct {
		by *client
		tk api.Turn
	}
	answerAll := func(what, id string, tks []held, fast int64) {
		t.Helper()
		for _, h := range tks {
			if s, d := h.by.respond(h.tk, "seen", nil); s != 200 {
				t.Fatalf("%s: answer %s: %d %s", what, h.tk.Turn, s, d)
			}
		}
		if f, s := pg.FastPathStats().Fast, pg.FastPathStats().Stale; f != fast || s != 0 {
			t.Fatalf("%s: fast %d, stale %d; want %d, 0", what, f, s, fast)
		}
		if th := a.thread(id); th.Status != workflow.StatusCompleted {
			t.Fatalf("%s: thread %s, want completed", what, th.Status)
		}
	}
	id := a.start("panel", nil, "")
	answerAll("parallel turns claimed apart", id, []held{{a, a.claimOne()}, {b, b.claimOne()}}, 0)
	// Both turns claimed at once by one agent: the claim holds every open
	// turn, so the view is kept; the first answer uses it up, the second
	// is made from a locked read.
	id = a.start("panel", nil, "")
	both := a.claim(map[string]any{"max": 2})
	if len(both) != 2 {
		t.Fatalf("claimed %d turns, want 2", len(both))
	}
	answerAll("two turns in one claim", id, []held{{a, both[0]}, {a, both[1]}}, 1)
}

// A view does not keep a long last message; the answer made from it reads
// the message, and the moderator sees it whole.
func TestPostgresFastPathLongMessage(t *testing.T) {
	ts := pgBackend.server(t)
	pg := ts.store.(*khalapg.Store)
	a := ts.agent("a")
	a.putWorkflow(`workflow: echo
binding: cloud
moderator: |
  $count(messages) >= 2 ? {"done": true, "result": messages.content} : {"role": "w", "instruction": "go"}
roles:
  w: {prompt: You write.}
`)
	id := a.start("echo", nil, "")
	long := strings.Repeat("x", khalapg.MaxViewBody+1)
	for _, content := range []string{long, "second"} {
		if s, d := a.respond(a.claimOne(), content, nil); s != 200 {
			t.Fatalf("answer: %d %s", s, d)
		}
	}
	if f, s := pg.FastPathStats().Fast, pg.FastPathStats().Stale; f != 2 || s != 0 {
		t.Fatalf("fast %d, stale %d; want 2, 0", f, s)
	}
	th := a.thread(id)
	got, _ := th.Result.([]any)
	if th.Status != workflow.StatusCompleted || len(got) != 2 || got[0] != long || got[1] != "second" {
		t.Fatalf("thread %s, result of %d items", th.Status, len(got))
	}
}

// An answer that hands the next turn to an agent waiting on the same
// replica (engine/handoff.go) leaves the view that turn's answer is made from:
// a sequential thread served by waiting agents writes every answer in one
// statement. The thread and its trace are those of any other run.
func TestPostgresFastPathHandoff(t *testing.T) {
	ts := pgBackend.server(t)
	pg := ts.store.(*khalapg.Store)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", map[string]any{"turns": 5}, "")
	tk := a.claimOne()
	for i := 1; i <= 5; i++ {
		next := make(chan []api.Turn, 1)
		if i < 5 {
			go func() { next <- a.claim(map[string]any{"wait": "5s"}) }()
			waitFor(t, "a parked claim", func() bool { return ts.srv.engine.Parked() == 1 })
		}
		if s, d := a.respond(tk, fmt.Sprint("answer ", i), nil); s != 200 {
			t.Fatalf("answer %d: %d %s", i, s, d)
		}
		if i < 5 {
			got := <-next
			if len(got) != 1 || got[0].Step != i+1 {
				t.Fatalf("handed turn after answer %d: %+v", i, got)
			}
			tk = got[0]
		}
	}
	// The first answer had its claim's view; the others, the view the
	// answer before them left.
	if f, s := pg.FastPathStats().Fast, pg.FastPathStats().Stale; f != 5 || s != 0 {
		t.Fatalf("fast %d, stale %d; want 5, 0", f, s)
	}
	th := a.thread(id)
	if th.Status != workflow.StatusCompleted || fmt.Sprint(th.Result) != "map[last:answer 5 turns:5]" {
		t.Fatalf("thread %s, result %v", th.Status, th.Result)
	}
	started := 0
	for _, e := range a.trace(id) {
		if e.Type == workflow.EventTurnStarted {
			started++
		}
	}
	if started != 5 {
		t.Fatalf("%d turn.started events, want 5", started)
	}
}
