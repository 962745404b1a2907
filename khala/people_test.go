package khala

import (
	"github.com/nerve-agents/nerve/khala/engine"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// releaseWF: an author's turn, then a person's approval, then done.
const releaseWF = `workflow: release
binding: cloud
moderator: |
  $count(messages) = 0 ? {"role": "author", "instruction": "write the release notes"}
  : $count(messages) = 1 ? {"role": "approver", "instruction": "approve " & last.content}
  : {"done": true, "result": {"approved": last.meta.approved, "by": last.agent}}
roles:
  author: {prompt: You write release notes.}
  approver:
    human: true
    answered_by: [alice, bob]
    prompt: Approve the release, or say what must change.
    meta: {type: object, required: [approved], properties: {approved: {type: boolean}}}
limits:
  idle: 1s
`

// person adds a person to ts's store and returns their client.
func (ts *testServer) person(name string) *client {
	ts.t.Helper()
	u, err := ts.srv.users().Add(ts.t.Context(), name)
	if err != nil {
		ts.t.Fatalf("add person %s: %v", name, err)
	}
	if !strings.HasPrefix(u.Token, prefixPerson) {
		ts.t.Fatalf("person token %q", u.Token)
	}
	return &client{ts: ts, name: name, token: u.Token}
}

// toApproval starts a release thread and answers its author's turn: the
// thread then waits for a person.
func toApproval(t *testing.T, a *client, webhook string) string {
	t.Helper()
	id := a.start("release", nil, webhook)
	tk := a.claimOne()
	if s, d := a.respond(tk, "v1.2", nil); s != 200 {
		t.Fatalf("author's answer: %d %s", s, d)
	}
	return id
}

func answerPath(id string, step int) string {
	return "/v1/threads/" + id + "/turns/" + id + "." + string(rune('0'+step)) + "/answer"
}

func TestHumanTurns(t *testing.T) { eachBackend(t, testHumanTurns) }

func testHumanTurns(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	alice, carol := ts.person("alice"), ts.person("carol")
	a.putWorkflow(releaseWF)
	hook := newHookReceiver(t, 0)
	id := toApproval(t, a, hook.URL)

	// No claim ever returns a person's turn.
	if got := a.claim(map[string]any{"max": 10}); len(got) != 0 {
		t.Fatalf("a claim returned %+v", got)
	}
	th := a.thread(id)
	if len(th.Waiting) != 1 || th.Waiting[0].Turn != id+".2" || th.Waiting[0].Role != "approver" ||
		strings.Join(th.Waiting[0].AnsweredBy, ",") != "alice,bob" || th.Waiting[0].Meta == nil ||
		!strings.Contains(th.Waiting[0].Prompt, "Approve the release") {
		t.Fatalf("thread's waiting: %+v", th.Waiting)
	}
	if p := hook.next(t); p.Event != workflow.EventTurnWaiting || p.Turn != id+".2" || p.Role != "approver" {
		t.Fatalf("webhook: %+v", p)
	}
	waitFor(t, "the waiting turn to go idle", func() bool { return strings.Contains(eventTypes(a.trace(id)), "turn.idle") })
	if p := hook.next(t); p.Event != engine.EventTurnIdle || p.Turn != id+".2" {
		t.Fatalf("idle webhook: %+v", p)
	}
	if got := eventTypes(a.trace(id)); !strings.Contains(got, "turn.answered turn.waiting turn.idle") {
		t.Fatalf("trace: %s", got)
	}

	if m := string(a.must("GET", "/metrics", nil, 200, nil)); !strings.Contains(m, "khala_turns_waiting 1\n") || !strings.Contains(m, "khala_queue_depth 0\n") {
		t.Errorf("metrics while a person's turn waits:\n%s", m)
	}
	var inbox []workflow.Waiting
	alice.must("GET", "/v1/inbox", nil, 200, &inbox)
	if len(inbox) != 1 || inbox[0].Turn != id+".2" || inbox[0].Ref != "release#"+id || inbox[0].Instruction != "approve v1.2" {
		t.Fatalf("alice's inbox: %+v", inbox)
	}
	carol.must("GET", "/v1/inbox", nil, 200, &inbox)
	if len(inbox) != 0 {
		t.Fatalf("carol's inbox: %+v (she is not in answered_by)", inbox)
	}

	// The refusals, each recording nothing.
	path := answerPath(id, 2)
	for _, c := range []struct {
		name   string
		who    *client
		body   any
		status int
		code   string
		says   string
	}{
		{"an agent's token", a, map[string]any{"content": "ok", "meta": map[string]any{"approved": true}}, 403, codeForbidden, "agent's token"},
		{"a person not in answered_by", carol, map[string]any{"content": "ok", "meta": map[string]any{"approved": true}}, 403, codeForbidden, "alice or bob"},
		{"meta of the wrong type", alice, map[string]any{"content": "ok", "meta": map[string]any{"approved": "yes"}}, 400, engine.CodeInvalidAnswer, "approved"},
		{"no meta", alice, map[string]any{"content": "looks fine"}, 400, engine.CodeInvalidAnswer, "--meta"},
		{"malformed JSON", alice, "{", 400, codeBadRequest, "malformed"},
	} {
		status, data := c.who.do("POST", path, c.body)
		if status != c.status || errCode(data) != c.code || !strings.Contains(string(data), c.says) {
			t.Errorf("%s: %d %s; want %d %s saying %q", c.name, status, data, c.status, c.code, c.says)
		}
	}
	if th := a.thread(id); th.Status != workflow.StatusRunning || len(th.Waiting) != 1 {
		t.Fatalf("after the refusals: %s, waiting %+v", th.Status, th.Waiting)
	}
	for _, p := range []string{"/v1/threads/" + id + "/turns/" + id + ".9/answer", "/v1/threads/thread-999/turns/thread-999.1/answer",
		"/v1/threads/" + id + "/turns/thread-999.2/answer"} {
		if status, data := alice.do("POST", p, map[string]any{"content": "x", "meta": map[string]any{"approved": true}}); status != 404 {
			t.Errorf("POST %s: %d %s; want 404", p, status, data)
		}
	}

	var out responseJSON
	alice.must("POST", path, map[string]any{"content": "ship it", "meta": map[string]any{"approved": true}}, 200, &out)
	if out.Status != workflow.StatusCompleted || out.Agent != "alice" {
		t.Fatalf("answer: %+v", out)
	}
	var msgs []workflow.Message
	a.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 2 || msgs[1].Agent != "alice" || msgs[1].Content != "ship it" || msgs[1].Role != "approver" {
		t.Fatalf("messages: %+v", msgs)
	}
	if status, data := alice.do("POST", path, map[string]any{"content": "again", "meta": map[string]any{"approved": true}}); status != 409 {
		t.Errorf("answering twice: %d %s; want 409", status, data)
	}
	alice.must("GET", "/v1/inbox", nil, 200, &inbox)
	if len(inbox) != 0 {
		t.Errorf("inbox after the answer: %+v", inbox)
	}
}

// The answer endpoint refuses what is not a person's waiting turn, and a
// person's token is no agent's.
func TestHumanTurnRefusals(t *testing.T) { eachBackend(t, testHumanTurnRefusals) }

func testHumanTurnRefusals(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	bob := ts.person("bob")
	a.putWorkflow(releaseWF)
	id := a.start("release", nil, "")
	answer := map[string]any{"content": "ok", "meta": map[string]any{"approved": true}}
	if status, data := bob.do("POST", answerPath(id, 1), answer); status != 409 || errCode(data) != engine.CodeNotWaiting {
		t.Errorf("answering an agent's turn: %d %s; want 409 not_waiting", status, data)
	}
	for _, p := range []string{"/v1/turns/claim", "/v1/workflows/release/threads"} {
		if status, data := bob.do("POST", p, map[string]any{}); status != 403 || errCode(data) != codeForbidden {
			t.Errorf("a person's token on POST %s: %d %s; want 403", p, status, data)
		}
	}
	if status, data := a.do("GET", "/v1/inbox", nil); status != 403 {
		t.Errorf("an agent's inbox: %d %s; want 403", status, data)
	}
	// People read threads (to answer by a thread's ref).
	if th := bob.thread(id); th.ID != id {
		t.Errorf("a person reading a thread: %+v", th)
	}
	other := toApproval(t, a, "")
	a.must("POST", "/v1/threads/"+other+"/cancel", nil, 200, nil)
	if status, data := bob.do("POST", answerPath(other, 2), answer); status != 409 || errCode(data) != codeThreadEnded {
		t.Errorf("answering a cancelled thread: %d %s; want 409 thread_ended", status, data)
	}
	// A removed person's token stops at once.
	if err := ts.srv.users().Remove(t.Context(), "bob"); err != nil {
		t.Fatal(err)
	}
	if status, data := bob.do("GET", "/v1/inbox", nil); status != 401 {
		t.Errorf("a removed person's inbox: %d %s; want 401", status, data)
	}
	if name, err := ts.srv.PersonByToken(t.Context(), bob.token); err == nil {
		t.Errorf("PersonByToken of a removed person: %q", name)
	}
}

// A waiting human turn outlives a restart of the server.
func TestHumanTurnSurvivesRestart(t *testing.T) { eachBackend(t, testHumanTurnSurvivesRestart) }

func testHumanTurnSurvivesRestart(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	alice := ts.person("alice")
	a.putWorkflow(releaseWF)
	id := toApproval(t, a, "")
	ts.stop()
	srv2 := newServerOn(t, ts.reopen(t))
	alice2 := &client{ts: srv2, token: alice.token, name: "alice"}
	var inbox []workflow.Waiting
	alice2.must("GET", "/v1/inbox", nil, 200, &inbox)
	if len(inbox) != 1 || inbox[0].Turn != id+".2" {
		t.Fatalf("inbox after a restart: %+v", inbox)
	}
	if name, err := srv2.srv.PersonByToken(t.Context(), alice.token); err != nil || name != "alice" {
		t.Fatalf("PersonByToken after a restart: %q, %v", name, err)
	}
	var out responseJSON
	alice2.must("POST", answerPath(id, 2), map[string]any{"content": "ok", "meta": map[string]any{"approved": false}}, 200, &out)
	if out.Status != workflow.StatusCompleted {
		t.Fatalf("after the answer: %+v", out)
	}
	var th threadJSON
	alice2.must("GET", "/v1/threads/"+id, nil, 200, &th)
	if res, _ := th.Result.(map[string]any); res["approved"] != false || res["by"] != "alice" {
		t.Fatalf("result: %#v", th.Result)
	}
}
