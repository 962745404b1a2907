package khala

import (
	"strings"
	"testing"
	"time"
)

// Threads started with priorities are claimed higher first, then oldest
// first; GET /v1/threads/{id} and the console's queue page show the
// priority; a priority out of bounds or not an integer is refused.
func TestPriorityOrdersClaims(t *testing.T) { eachBackend(t, testPriorityOrdersClaims) }

func testPriorityOrdersClaims(t *testing.T, bk backend) {
	ts := bk.server(t, withPerson)
	a := ts.agent("a")
	a.putWorkflow(leaseWF("1m", 1, "0s"))
	start := func(p any) string {
		t.Helper()
		body := map[string]any{"input": map[string]any{}}
		if p != nil {
			body["priority"] = p
		}
		var out startResponse
		a.must("POST", "/v1/workflows/lease/threads", body, 201, &out)
		return out.Thread
	}
	low, none, high, mid, high2 := start(-5), start(nil), start(100), start(7), start(100)
	var th struct {
		Priority int `json:"priority"`
		Turns    []struct {
			State    string `json:"state"`
			Priority int    `json:"priority"`
		} `json:"turns"`
	}
	a.must("GET", "/v1/threads/"+mid, nil, 200, &th)
	if th.Priority != 7 || len(th.Turns) != 1 || th.Turns[0].Priority != 7 || th.Turns[0].State != "queued" {
		t.Fatalf("GET thread: %+v, want priority 7 on the thread and its queued turn", th)
	}
	var plain map[string]any
	a.must("GET", "/v1/threads/"+none, nil, 200, &plain)
	if p, ok := plain["priority"]; !ok || p != float64(0) {
		t.Errorf("a thread started without a priority shows %v (present %v), want 0", p, ok)
	}
	// The console's queue page shows each turn's priority.
	b := newBrowser(t, ts.URL)
	b.signIn(testPerson)
	if _, page := b.get("/queue"); !strings.Contains(page, "<th>Priority</th>") || !strings.Contains(page, "<td>-5</td>") ||
		!strings.Contains(page, "<td>100</td>") {
		t.Errorf("queue page lacks the priorities:\n%s", page)
	}
	var order []string
	for range 5 {
		order = append(order, a.claimOne().Thread)
	}
	want := []string{high, high2, mid, none, low}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("claimed %v, want %v", order, want)
	}
	for _, bad := range []any{101, -101, 1.5, "high", true} {
		s, d := a.do("POST", "/v1/workflows/lease/threads", map[string]any{"input": map[string]any{}, "priority": bad})
		if s != 400 || !strings.Contains(string(d), "priority") {
			t.Errorf("priority %v: %d %s, want 400 naming priority", bad, s, d)
		}
	}
}

// A long poll already waiting gets a new thread's turn in the commit that
// creates the thread: it is claimed when the creation is answered.
func TestNewThreadHandedToWaitingPoll(t *testing.T) { eachBackend(t, testNewThreadHandedToWaitingPoll) }

func testNewThreadHandedToWaitingPoll(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(leaseWF("1m", 1, "0s"))
	got := make(chan string, 1)
	go func() {
		turns := b.claim(map[string]any{"max": 1, "wait": "10s"})
		if len(turns) == 1 {
			got <- turns[0].Thread
		}
		close(got)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.engine.Parked() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the long poll never parked")
		}
		time.Sleep(time.Millisecond)
	}
	id := a.start("lease", nil, "")
	var th struct {
		Turns []struct{ State, Agent string } `json:"turns"`
	}
	a.must("GET", "/v1/threads/"+id, nil, 200, &th)
	if len(th.Turns) != 1 || th.Turns[0].State != "claimed" || th.Turns[0].Agent != "b" {
		t.Errorf("just after creation: %+v, want its turn claimed by b", th.Turns)
	}
	if thread := <-got; thread != id {
		t.Errorf("the waiting poll got %q, want %s", thread, id)
	}
}

// A child thread runs at its parent's priority: its turns are claimed
// ahead of older work of lower priority.
func TestChildHasParentPriority(t *testing.T) { eachBackend(t, testChildHasParentPriority) }

func testChildHasParentPriority(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(reviewWF)
	a.putWorkflow(fanOutWF)
	var older startResponse
	a.must("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"}}, 201, &older)
	var parent startResponse
	a.must("POST", "/v1/workflows/fanout/threads", map[string]any{"input": map[string]any{}, "priority": 8}, 201, &parent)
	cv := a.children(parent.Thread)
	if len(cv.kids) != 2 {
		t.Fatalf("children: %+v", cv.Children)
	}
	for _, k := range cv.kids {
		if child := a.children(k); child.Priority != 8 {
			t.Errorf("child %s: priority %d, want its parent's 8", k, child.Priority)
		}
	}
	got := a.claim(map[string]any{"max": 10, "wait": "5s"})
	for len(got) < 4 {
		got = append(got, a.claimOne())
	}
	if last := got[len(got)-1]; last.Thread != older.Thread {
		t.Errorf("claimed %s last, want the older priority 0 thread %s after the parent's and children's turns", last.Thread, older.Thread)
	}
}
