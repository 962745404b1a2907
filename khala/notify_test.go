package khala

import (
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

func TestTurnNotify(t *testing.T) { eachBackend(t, testTurnNotify) }

// An agent's notify from inside a turn it holds goes into the thread's
// trace with its level, and to the thread's webhook; a bad level or an
// empty message is refused.
func testTurnNotify(t *testing.T, bk backend) {
	ts := bk.server(t, fastBackoff)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	hook := newHookReceiver(t, 0)
	id := a.start("pair", nil, hook.URL)
	held := a.claimOne()
	path := "/v1/turns/" + held.Turn + "/events"
	note := api.TurnEvent{Type: api.EventNotify, Status: api.NotifyBlocking, Message: "need the staging password"}
	for _, c := range []struct {
		name   string
		ev     api.TurnEvent
		status int
	}{
		{"a level that is none", api.TurnEvent{Type: api.EventNotify, Status: "urgent", Message: "m"}, 400},
		{"an empty message", api.TurnEvent{Type: api.EventNotify, Status: api.NotifyInfo, Message: "  "}, 400},
		{"a message too long", api.TurnEvent{Type: api.EventNotify, Status: api.NotifyInfo, Message: strings.Repeat("x", api.MaxNotifyMessage+1)}, 400},
		{"the holder's notice", note, 200},
	} {
		if s, d := a.do("POST", path, api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{c.ev}}); s != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, s, d, c.status)
		}
	}
	var got []workflow.Event
	for _, e := range a.trace(id) {
		if e.Type == api.EventNotify {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].Status != api.NotifyBlocking || got[0].Message != note.Message || got[0].Agent != "a" ||
		got[0].Step != held.Step || got[0].Role != held.Role || got[0].Turn != held.Turn {
		t.Fatalf("want the one notice in the trace, got %+v", got)
	}
	p := hook.next(t)
	if p.Event != api.EventNotify || p.Thread != id || p.Workflow != "pair" || p.Status != workflow.StatusRunning ||
		p.Level != api.NotifyBlocking || p.Message != note.Message || p.Step != held.Step || p.Turn != held.Turn {
		t.Fatalf("webhook payload %+v", p)
	}
}
