package khala

import (
	"encoding/json"
	"github.com/nerve-agents/nerve/khala/engine"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// reviewWF is a child: one reviewer's turn, its answer the result (an
// item "bad" fails it).
const reviewWF = `workflow: review
binding: cloud
inputs:
  item: {type: string}
moderator: |
  input.item = "bad" ? {"fail": "cannot review " & input.item}
  : $count(messages) = 0 ? {"role": "reviewer", "instruction": "review " & input.item}
  : {"done": true, "result": {"item": input.item, "verdict": last.content}}
roles:
  reviewer: {prompt: You review one item.}
`

// fanOutWF starts a child review per item beside an agent's turn, then
// sums up what came back.
const fanOutWF = `workflow: fanout
binding: cloud
moderator: |
  $count(messages) = 0
    ? [{"workflow": "review", "input": {"item": "a"}},
       {"workflow": "review", "input": {"item": "b"}, "role": "second"},
       {"role": "summariser", "instruction": "get ready"}]
    : {"done": true, "result": messages.{"role": role, "child": child, "content": content, "error": error.kind}}
roles:
  summariser: {prompt: You sum up.}
`

// nestWF starts itself as its child, until the depth limit refuses it.
const nestWF = `workflow: nest
binding: cloud
moderator: |
  $count(messages) = 0 ? {"workflow": "nest", "input": {}} : {"done": true, "result": last.error}
roles:
  unused: {prompt: never asked.}
`

// childrenView is a thread as GET /v1/threads/{id} shows it, with its
// children's ids (from their refs) for the tests.
type childrenView struct {
	workflow.Thread
	kids []string
}

func (v childrenView) count(status string) int {
	if v.Children == nil {
		return 0
	}
	return v.Children.Counts[status]
}

func (c *client) children(id string) childrenView {
	c.ts.t.Helper()
	var out childrenView
	c.must("GET", "/v1/threads/"+id, nil, 200, &out.Thread)
	if out.Children != nil {
		for _, ref := range out.Children.Refs {
			out.kids = append(out.kids, ref[strings.Index(ref, "#")+1:])
		}
	}
	return out
}

func TestChildWorkflows(t *testing.T) { eachBackend(t, testChildWorkflows) }

func testChildWorkflows(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	a.putWorkflow(reviewWF)
	a.putWorkflow(fanOutWF)
	id := a.start("fanout", nil, "")
	cv := a.children(id)
	if cv.count(workflow.StatusRunning) != 2 || len(cv.kids) != 2 || !strings.HasPrefix(cv.Children.Refs[0], "review#thread-") {
		t.Fatalf("children: %+v", cv.Children)
	}
	kids := cv.kids
	for i, k := range kids {
		child := a.children(k)
		if child.Parent == nil || child.Parent.Thread != id || child.Parent.Step != i+1 || child.Depth != 1 || child.Status != workflow.StatusRunning {
			t.Fatalf("child %s: parent %+v, depth %d, %s", k, child.Parent, child.Depth, child.Status)
		}
	}
	// The parent's summariser and each child's reviewer, in parallel.
	turns := a.claim(map[string]any{"max": 10, "wait": "5s"})
	for len(turns) < 3 {
		turns = append(turns, a.claimOne())
	}
	byRole := map[string]api.Turn{}
	for _, tk := range turns {
		byRole[tk.Role+" "+tk.Thread] = tk
	}
	for key, tk := range byRole {
		if s, d := a.respond(tk, "ok from "+key, nil); s != 200 {
			t.Fatalf("answer %s: %d %s", key, s, d)
		}
	}
	th := a.children(id)
	if th.Status != workflow.StatusCompleted || th.count(workflow.StatusCompleted) != 2 || th.count(workflow.StatusRunning) != 0 {
		t.Fatalf("parent after its children: %s %s, children %+v", th.Status, th.Error, th.Children)
	}
	res, _ := json.Marshal(th.Result)
	for _, want := range []string{`"child":"review#` + kids[0], `"role":"second"`, `"role":"summariser"`, `\"verdict\":\"ok from reviewer ` + kids[1]} {
		if !strings.Contains(string(res), want) {
			t.Errorf("result lacks %s: %s", want, res)
		}
	}
	if got := eventTypes(a.trace(id)); !strings.Contains(got, "child.started child.started turn.queued") || strings.Count(got, "child.ended") != 2 {
		t.Errorf("parent's trace: %s", got)
	}
}

// A child that fails, or cannot start, is its step's message with an
// error of kind child; a child past the spawn depth fails its parent.
func TestChildFailures(t *testing.T) { eachBackend(t, testChildFailures) }

func testChildFailures(t *testing.T, bk backend) {
	ts := bk.server(t, func(o *Options) { o.MaxSpawnDepth = 1 })
	a := ts.agent("laptop")
	a.putWorkflow(reviewWF)
	a.putWorkflow(strings.Replace(fanOutWF, `"item": "a"`, `"item": "bad"`, 1))
	a.putWorkflow(nestWF)
	id := a.start("fanout", nil, "")
	for range 2 {
		tk := a.claimOne()
		a.respond(tk, "fine", nil)
	}
	th := a.children(id)
	res, _ := json.Marshal(th.Result)
	if th.Status != workflow.StatusCompleted || !strings.Contains(string(res), `"error":"child"`) || th.count(workflow.StatusFailed) != 1 {
		t.Fatalf("fan-out with a failing child: %s %s, result %s, children %+v", th.Status, th.Error, res, th.Children)
	}
	var msgs []workflow.Message
	a.must("GET", "/v1/threads/"+id+"/messages?step=1", nil, 200, &msgs)
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Kind != "child" || !strings.Contains(msgs[0].Error.Message, "cannot review bad") {
		t.Fatalf("the failed child's message: %+v", msgs)
	}

	// nest: its child (depth 1) may not start another (depth 2).
	top := a.start("nest", nil, "")
	th = a.children(top)
	if th.Status != workflow.StatusCompleted || th.count(workflow.StatusFailed) != 1 {
		t.Fatalf("nest: %s %s, children %+v", th.Status, th.Error, th.Children)
	}
	child := a.children(th.kids[0])
	if child.Status != workflow.StatusFailed || !strings.Contains(child.Error, "max_spawn_depth 1") || child.Depth != 1 {
		t.Fatalf("the child past the depth: %s %q depth %d", child.Status, child.Error, child.Depth)
	}

	// An agent's child through the API: refused past the depth, refused
	// under an ended or unknown parent.
	var out startResponse
	a.must("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
		"parent": map[string]any{"thread": id}}, 409, nil)
	if status, data := a.do("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
		"parent": map[string]any{"thread": child.ID}}); status != 409 && status != 422 {
		t.Errorf("a child of an ended parent: %d %s", status, data)
	}
	running := a.start("review", map[string]any{"item": "y"}, "")
	a.must("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
		"parent": map[string]any{"thread": running, "step": 1}}, 201, &out)
	if c := a.children(out.Thread); c.Depth != 1 || c.Parent == nil || c.Parent.Thread != running {
		t.Fatalf("agent's child: %+v depth %d", c.Parent, c.Depth)
	}
	status, data := a.do("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
		"parent": map[string]any{"thread": out.Thread}})
	if status != 422 || errCode(data) != engine.CodeTooDeep || !strings.Contains(string(data), "max_spawn_depth 1") {
		t.Errorf("a grandchild past the depth: %d %s", status, data)
	}
	for _, p := range []string{"thread-999", "nope"} {
		if status, data := a.do("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
			"parent": map[string]any{"thread": p}}); status != 404 && status != 400 {
			t.Errorf("parent %s: %d %s", p, status, data)
		}
	}
	// Cancelling the parent cancels its running child.
	a.must("POST", "/v1/threads/"+running+"/cancel", nil, 200, nil)
	if c := a.children(out.Thread); c.Status != workflow.StatusCancelled || !strings.Contains(c.Error, "parent review#"+running) {
		t.Errorf("the child of a cancelled parent: %s %q", c.Status, c.Error)
	}
	if p := a.children(running); p.count(workflow.StatusCancelled) != 1 {
		t.Errorf("the cancelled parent's children: %+v", p.Children)
	}
}

// Parent and child stay linked across a restart of the server.
func TestChildSurvivesRestart(t *testing.T) { eachBackend(t, testChildSurvivesRestart) }

func testChildSurvivesRestart(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	a.putWorkflow(reviewWF)
	a.putWorkflow(fanOutWF)
	id := a.start("fanout", nil, "")
	ts.stop()
	srv2 := newServerOn(t, ts.reopen(t))
	b := &client{ts: srv2, token: a.token, name: "laptop"}
	for range 3 {
		tk := b.claimOne()
		if s, d := b.respond(tk, "after restart", nil); s != 200 {
			t.Fatalf("answer %s: %d %s", tk.Turn, s, d)
		}
	}
	if th := b.children(id); th.Status != workflow.StatusCompleted || th.count(workflow.StatusCompleted) != 2 {
		t.Fatalf("parent after a restart: %s %q, children %+v", th.Status, th.Error, th.Children)
	}
}

// What a crash leaves undone between a child's commits, the sweeper does:
// a child turn whose thread was never created gets it, and a child that
// ended without its parent hearing is delivered.
func TestChildCheckRecovers(t *testing.T) { eachBackend(t, testChildCheckRecovers) }

func testChildCheckRecovers(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	a.putWorkflow(reviewWF)
	a.putWorkflow(fanOutWF)
	id := a.start("fanout", nil, "")
	kids := a.children(id).kids
	ts.stop()

	// As a crash would leave it: step 2's child never created, step 1's
	// child ended without a word to its parent.
	st := ts.reopen(t)
	now := time.Now()
	err := st.UpdateThread(t.Context(), id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := &khaladb.ThreadChange{Thread: v.Thread}
		tk := *v.Turn(khaladb.TurnID(id, 2))
		tk.Child = "thread-50"
		c.Turns = []khaladb.Turn{tk}
		return c, nil
	})
	if err == nil {
		err = st.UpdateThread(t.Context(), kids[0], func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			return engine.CancelChange(v, "the test", now)
		})
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	// A server whose clock is past the turns' next check.
	later := func(o *Options) { o.Now = func() time.Time { return time.Now().Add(2 * engine.ChildCheck) } }
	b := &client{ts: newServerOn(t, ts.reopen(t), later), token: a.token, name: "laptop"}
	waitFor(t, "the ended child's delivery", func() bool {
		var msgs []workflow.Message
		b.must("GET", "/v1/threads/"+id+"/messages?step=1", nil, 200, &msgs)
		return len(msgs) == 1 && msgs[0].Error != nil && msgs[0].Error.Kind == "child" && strings.Contains(msgs[0].Error.Message, "the test")
	})
	waitFor(t, "the missing child's creation", func() bool {
		status, data := b.do("GET", "/v1/threads/thread-50", nil)
		return status == 200 && strings.Contains(string(data), `"thread":"`+id+`"`)
	})
}

// A child that cannot start at all (an unknown workflow, bad input) fails
// its parent with the reason, as it does locally.
func TestChildThatCannotStart(t *testing.T) { eachBackend(t, testChildThatCannotStart) }

func testChildThatCannotStart(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	a.putWorkflow(reviewWF)
	for _, c := range []struct{ wf, says string }{
		{strings.Replace(fanOutWF, `{"workflow": "review", "input": {"item": "a"}}`, `{"workflow": "nosuch", "input": {}}`, 1), `"nosuch" is not published`},
		{strings.Replace(fanOutWF, `"input": {"item": "a"}`, `"input": {"item": 7}`, 1), "item"},
	} {
		a.putWorkflow(c.wf)
		id := a.start("fanout", nil, "")
		th := a.children(id)
		if th.Status != workflow.StatusFailed || !strings.Contains(th.Error, c.says) {
			t.Errorf("parent of a child that cannot start: %s %q; want failed saying %s", th.Status, th.Error, c.says)
		}
		var msgs []workflow.Message
		a.must("GET", "/v1/threads/"+id+"/messages?step=1", nil, 200, &msgs)
		if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Kind != workflow.ErrorKindSpawn {
			t.Errorf("the step's message: %+v", msgs)
		}
		// Its other child (never started) and its agent's turn are
		// cancelled with it.
		if th = a.children(id); th.count(workflow.StatusRunning) != 0 || th.count(workflow.StatusCancelled) != 1 || th.count(workflow.StatusFailed) != 1 {
			t.Errorf("children of the failed parent: %+v", th.Children)
		}
		if status, _ := a.do("GET", "/v1/threads/"+th.kids[1], nil); status != 404 {
			t.Errorf("the sibling child was started after its parent failed: %d", status)
		}
		if got := a.claim(map[string]any{"max": 10}); len(got) != 0 {
			t.Errorf("claims after the parent failed: %+v", got)
		}
	}
}
