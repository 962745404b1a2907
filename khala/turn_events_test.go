package khala

import (
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

func TestTurnEvents(t *testing.T) { eachBackend(t, testTurnEvents) }

// An agent adds detections of a turn it holds to the thread's trace; the
// claim is checked as a heartbeat's is, and only detections are taken.
func testTurnEvents(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	held := a.claimOne()
	stall := api.TurnEvent{Type: workflow.EventDetection, Status: "stall", Message: "no output for 1m0s", Adapter: "claude"}
	path := "/v1/turns/" + held.Turn + "/events"

	for _, c := range []struct {
		name   string
		who    *client
		path   string
		body   any
		status int
		code   string
	}{
		{"not the holder", b, path, api.TurnEvents{Claim: "0123", Events: []api.TurnEvent{stall}}, 409, codeClaimLost},
		{"no claim", a, path, api.TurnEvents{Events: []api.TurnEvent{stall}}, 400, ""},
		{"no events", a, path, api.TurnEvents{Claim: held.Claim}, 400, ""},
		{"not a detection", a, path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{{Type: workflow.EventTurnAnswered, Status: "x"}}}, 400, ""},
		{"no kind", a, path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{{Type: workflow.EventDetection, Message: "m"}}}, 400, ""},
		{"a kind that is not a word", a, path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{{Type: workflow.EventDetection, Status: "Stall!"}}}, 400, ""},
		{"a message too long", a, path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{{Type: workflow.EventDetection, Status: "stall", Message: strings.Repeat("x", maxEventMessage+1)}}}, 400, ""},
		{"malformed JSON", a, path, "{", 400, ""},
		{"unknown turn", a, "/v1/turns/nope/events", api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{stall}}, 404, ""},
		{"the holder", a, path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{stall}}, 200, ""},
	} {
		s, d := c.who.do("POST", c.path, c.body)
		if s != c.status || c.code != "" && errCode(d) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, s, d, c.status, c.code)
		}
	}

	var got []workflow.Event
	for _, e := range a.trace(id) {
		if e.Type == workflow.EventDetection {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("want the holder's one detection in the trace, got %+v", got)
	}
	if e := got[0]; e.Status != "stall" || e.Agent != "a" || e.Adapter != "claude" || e.Turn != held.Turn ||
		e.Claim != held.Claim || e.Step != held.Step || e.Role != held.Role || e.Message != stall.Message {
		t.Fatalf("detection %+v of turn %+v", e, held)
	}
	// Only an event was added: the turn is still held and answered as usual.
	if th := a.thread(id); len(th.Turns) != 1 || th.Turns[0].State != khaladb.TurnClaimed || th.Turns[0].Agent != "a" {
		t.Fatalf("after a detection: %+v", th.Turns)
	}
	if s, d := a.respond(held, "done", nil); s != 200 {
		t.Fatalf("respond after a detection: %d %s", s, d)
	}
	if s, d := a.do("POST", path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{stall}}); s != 409 || errCode(d) != codeClaimLost {
		t.Fatalf("events of an answered turn: %d %s", s, d)
	}
}
