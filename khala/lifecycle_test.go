package khala

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

func TestLifecycle(t *testing.T) { eachBackend(t, testLifecycle) }

func testLifecycle(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop-1")
	b := ts.agent("laptop-2")

	a.must("PUT", "/v1/workflows/pair", map[string]string{"source": pairWF}, 201, nil)
	// Publishing again (here as YAML itself) updates it: 200.
	if status, data := a.send("PUT", "/v1/workflows/pair", "application/yaml", pairWF); status != 200 {
		t.Fatalf("republish: %d %s", status, data)
	}
	var list []workflowJSON
	a.must("GET", "/v1/workflows", nil, 200, &list)
	if len(list) != 1 || list[0].Name != "pair" || strings.Join(list[0].Roles, ",") != "author,reviewer" || list[0].UpdatedBy != "laptop-1" {
		t.Fatalf("list: %+v", list)
	}
	var one workflowJSON
	a.must("GET", "/v1/workflows/pair", nil, 200, &one)
	if one.Source != pairWF || one.Limits.MaxAttempts != 3 {
		t.Fatalf("get: %+v", one)
	}

	var started startResponse
	a.must("POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": 2}}, 201, &started)
	if started.Thread != "thread-1" || started.Status != workflow.StatusRunning {
		t.Fatalf("start: %+v", started)
	}
	id := started.Thread

	t1 := b.claimOne()
	if t1.Turn != "thread-1.1" || t1.Role != "author" || t1.Step != 1 || t1.Attempt != 1 || t1.Workflow != "pair" || t1.Thread != id {
		t.Fatalf("claim 1: %+v", t1)
	}
	for _, want := range []string{"You write the change.", "turn 1", "pair#thread-1"} {
		if !strings.Contains(t1.Prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, t1.Prompt)
		}
	}
	if d := time.Until(t1.LeaseExpires); d < 9*time.Minute || d > 10*time.Minute {
		t.Errorf("lease expires in %s, want the default 10m", d)
	}
	// Nothing else is queued while the author works.
	if got := a.claim(map[string]any{"max": 5}); len(got) != 0 {
		t.Fatalf("second claim got %+v", got)
	}
	var hb struct {
		LeaseExpires time.Time `json:"lease_expires_at"`
		Cancel       bool      `json:"cancel"`
	}
	b.must("POST", "/v1/turns/"+t1.Turn+"/heartbeat", map[string]string{"claim": t1.Claim}, 200, &hb)
	if hb.Cancel || !hb.LeaseExpires.After(t1.LeaseExpires) {
		t.Fatalf("heartbeat: %+v (claimed lease %s)", hb, t1.LeaseExpires)
	}
	if status, data := b.respond(t1, "here is the change", nil); status != 200 {
		t.Fatalf("respond 1: %d %s", status, data)
	}
	// A resent response (the agent's outbox after a lost 200) is acknowledged again, recorded once.
	if status, data := b.respond(t1, "here is the change", nil); status != 200 {
		t.Fatalf("resend: %d %s", status, data)
	}

	t2 := a.claimOne()
	if t2.Role != "reviewer" || t2.Step != 2 || !strings.Contains(t2.Prompt, "You review the change.") {
		t.Fatalf("claim 2: %+v", t2)
	}
	status, data := a.do("POST", "/v1/turns/"+t2.Turn+"/response", map[string]any{
		"claim": t2.Claim, "content": "looks good", "meta": map[string]any{"approved": true},
		"adapter": "codex", "usage": map[string]any{"model": "m", "duration_ms": 12}})
	if status != 200 || !strings.Contains(string(data), `"status":"completed"`) {
		t.Fatalf("respond 2: %d %s", status, data)
	}

	th := a.thread(id)
	if th.Status != workflow.StatusCompleted || th.Step != 2 || len(th.Turns) != 0 || th.EndedAt.IsZero() {
		t.Fatalf("thread: %+v", th.Thread)
	}
	res, _ := th.Result.(map[string]any)
	if res["turns"] != float64(2) || res["last"] != "looks good" {
		t.Fatalf("result: %#v", th.Result)
	}

	var msgs []workflow.Message
	a.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 2 || msgs[0].Agent != "laptop-2" || msgs[1].Agent != "laptop-1" || msgs[1].Usage == nil || msgs[1].Adapter != "codex" {
		t.Fatalf("messages: %+v", msgs)
	}
	for q, want := range map[string]int{"role=reviewer": 1, "last=1": 1, "step=1": 1, "step=3": 0, "role=author&last=5": 1,
		"since=" + url.QueryEscape(msgs[1].At.Format(time.RFC3339Nano)): 1} {
		var got []workflow.Message
		a.must("GET", "/v1/threads/"+id+"/messages?"+q, nil, 200, &got)
		if len(got) != want {
			t.Errorf("messages?%s: want %d, got %d", q, want, len(got))
		}
	}

	evs := a.trace(id)
	want := "thread.started turn.queued turn.started turn.answered turn.queued turn.started turn.answered thread.ended"
	if got := eventTypes(evs); got != want {
		t.Fatalf("trace:\n got %s\nwant %s", got, want)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.Thread != id || e.At.IsZero() {
			t.Errorf("event %d: %+v", i, e)
		}
		if strings.HasPrefix(e.Type, "turn.") && (e.Turn == "" || e.Role == "" || e.Attempt != 1) {
			t.Errorf("turn event without turn, role or attempt: %+v", e)
		}
		if e.Type == workflow.EventTurnStarted || e.Type == workflow.EventTurnAnswered {
			if e.Agent == "" || e.Claim == "" {
				t.Errorf("lease event without agent or claim: %+v", e)
			}
		}
	}
	var threads []threadJSON
	a.must("GET", "/v1/threads?workflow=pair&status=completed&limit=5", nil, 200, &threads)
	if len(threads) != 1 || threads[0].ID != id {
		t.Fatalf("threads: %+v", threads)
	}
	a.must("GET", "/v1/threads?status=running", nil, 200, &threads)
	if len(threads) != 0 {
		t.Fatalf("running threads: %+v", threads)
	}
	var me struct{ Agent string }
	a.must("GET", "/v1/agents/me", nil, 200, &me)
	if me.Agent != "laptop-1" {
		t.Fatalf("me: %+v", me)
	}
}

func TestParallelTurns(t *testing.T) { eachBackend(t, testParallelTurns) }

func testParallelTurns(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(panelWF)
	id := a.start("panel", nil, "")
	ta := a.claim(map[string]any{"roles": []string{"a"}, "wait": "1s"})
	tb := b.claim(map[string]any{"roles": []string{"b"}, "wait": "1s"})
	if len(ta) != 1 || len(tb) != 1 || ta[0].Step != 1 || tb[0].Step != 2 {
		t.Fatalf("claims: %+v %+v", ta, tb)
	}
	// The second answer first: the moderator waits for both.
	if s, d := b.respond(tb[0], "B says", nil); s != 200 || !strings.Contains(string(d), "running") {
		t.Fatalf("respond b: %d %s", s, d)
	}
	if s, d := a.respond(ta[0], "A says", nil); s != 200 || !strings.Contains(string(d), "completed") {
		t.Fatalf("respond a: %d %s", s, d)
	}
	th := a.thread(id)
	if got, _ := th.Result.([]any); len(got) != 2 || got[0] != "A says" || got[1] != "B says" {
		t.Fatalf("result: %#v", th.Result)
	}
}

func TestClaimFiltersAndMax(t *testing.T) { eachBackend(t, testClaimFiltersAndMax) }

func testClaimFiltersAndMax(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	a.putWorkflow(panelWF)
	for range 3 {
		a.start("pair", nil, "")
	}
	a.start("panel", nil, "")
	if got := a.claim(map[string]any{"workflows": []string{"nope"}}); len(got) != 0 {
		t.Fatalf("unknown workflow filter: %+v", got)
	}
	if got := a.claim(map[string]any{"roles": []string{"reviewer"}}); len(got) != 0 {
		t.Fatalf("no reviewer turn is queued yet: %+v", got)
	}
	got := a.claim(map[string]any{"max": 2, "workflows": []string{"pair"}})
	if len(got) != 2 || got[0].Thread != "thread-1" || got[1].Thread != "thread-2" {
		t.Fatalf("oldest first, max 2: %+v", got)
	}
	got = a.claim(map[string]any{"max": 10, "roles": []string{"b", "author"}})
	if len(got) != 2 || got[0].Thread != "thread-3" || got[1].Role != "b" {
		t.Fatalf("roles filter: %+v", got)
	}
	got = a.claim(map[string]any{"max": 10, "wait": 0.05})
	if len(got) != 1 || got[0].Role != "a" {
		t.Fatalf("the rest: %+v", got)
	}
}

func TestClaimLongPollWakes(t *testing.T) { eachBackend(t, testClaimLongPollWakes) }

func testClaimLongPollWakes(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	type res struct {
		turns []api.Turn
		at    time.Time
	}
	done := make(chan res)
	go func() {
		got := a.claim(map[string]any{"wait": "10s"})
		done <- res{got, time.Now()}
	}()
	ts.waitParked(t, 1)
	a.start("pair", nil, "")
	queued := time.Now() // the turn is committed before the 201
	r := <-done
	if len(r.turns) != 1 {
		t.Fatalf("long poll returned %+v", r.turns)
	}
	// Woken by the queue, not by a poll interval (Recheck is 5s): the
	// claim's own commit is all that separates it from the 201.
	if d := r.at.Sub(queued); d > 100*time.Millisecond {
		t.Fatalf("long poll woke %s after the turn was queued", d)
	} else {
		t.Logf("the long poll returned %s after the start's 201", d)
	}
	// An empty long poll returns [] after its wait.
	start := time.Now()
	if got := a.claim(map[string]any{"wait": "200ms"}); len(got) != 0 {
		t.Fatalf("empty poll: %+v", got)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("empty poll took %s", d)
	}
}

func TestModeratorFaults(t *testing.T) { eachBackend(t, testModeratorFaults) }

func testModeratorFaults(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(`workflow: broken
binding: cloud
moderator: '$count(messages) = 0 ? {"role": "nobody"} : {"done": true}'
roles:
  worker: {prompt: work}
`)
	var out startResponse
	a.must("POST", "/v1/workflows/broken/threads", nil, 201, &out)
	if out.Status != workflow.StatusFailed || !strings.Contains(out.Error, `named role "nobody"`) || !strings.Contains(out.Error, "workflow broken") {
		t.Fatalf("start: %+v", out)
	}
	if got := eventTypes(a.trace(out.Thread)); got != "thread.started thread.ended" {
		t.Fatalf("trace: %s", got)
	}
	a.putWorkflow(`workflow: failing
binding: cloud
moderator: '$count(messages) = 0 ? {"role": "worker"} : {"fail": "the worker said " & last.content}'
roles:
  worker: {prompt: work}
`)
	id := a.start("failing", nil, "")
	tk := a.claimOne()
	if s, d := a.respond(tk, "no", nil); s != 200 || !strings.Contains(string(d), "failed") {
		t.Fatalf("respond: %d %s", s, d)
	}
	if th := a.thread(id); th.Status != workflow.StatusFailed || th.Error != "the worker said no" {
		t.Fatalf("thread: %+v", th.Thread)
	}
}
