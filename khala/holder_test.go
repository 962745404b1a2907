package khala

import (
	"net/http"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// A claim id is in every thread's trace, readable by any agent: another
// agent presenting it is refused (403 not_holder, not a lost lease) on
// every holder's request, and the holder keeps its lease and answers.
func TestOtherAgentsClaimRefused(t *testing.T) { eachBackend(t, testOtherAgentsClaimRefused) }

func testOtherAgentsClaimRefused(t *testing.T, bk backend) {
	ts := bk.server(t)
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	ta := a.claimOne()
	var stolen string
	for _, e := range b.trace(id) {
		if e.Type == workflow.EventTurnStarted && e.Turn == ta.Turn {
			stolen = e.Claim
		}
	}
	if stolen != ta.Claim {
		t.Fatalf("the trace shows claim %q, want %q", stolen, ta.Claim)
	}
	forged := api.Turn{Turn: ta.Turn, Claim: stolen}
	refused := func(what string, status int, data []byte) {
		t.Helper()
		if status != http.StatusForbidden || errCode(data) != api.CodeNotHolder {
			t.Fatalf("%s with a's claim: %d %s; want 403 %s", what, status, data, api.CodeNotHolder)
		}
	}
	for _, ep := range []string{"heartbeat", "release"} {
		s, d := b.do("POST", "/v1/turns/"+ta.Turn+"/"+ep, map[string]string{"claim": stolen})
		refused(ep, s, d)
	}
	s, d := b.do("POST", "/v1/turns/"+ta.Turn+"/events", map[string]any{"claim": stolen,
		"events": []map[string]string{{"type": workflow.EventDetection, "status": "stall", "message": "forged"}}})
	refused("events", s, d)
	s, d = b.respond(forged, "forged", nil)
	refused("response", s, d)
	if got := b.claim(map[string]any{}); len(got) != 0 {
		t.Fatalf("b claimed %+v: a's turn was given back", got)
	}
	// a still holds its lease, and answers.
	a.must("POST", "/v1/turns/"+ta.Turn+"/heartbeat", map[string]string{"claim": ta.Claim}, 200, nil)
	if s, d := a.respond(ta, "a's work", nil); s != 200 {
		t.Fatalf("the holder's response: %d %s", s, d)
	}
	// Once answered, the claim stays a's: b's resend is not acknowledged.
	s, d = b.respond(forged, "forged", nil)
	refused("response after the answer", s, d)
	s, d = b.do("POST", "/v1/turns/"+ta.Turn+"/release", map[string]string{"claim": stolen})
	refused("release after the answer", s, d)
	if s, _ := a.respond(ta, "a's work", nil); s != 200 {
		t.Fatalf("the holder's resent response: %d", s)
	}
	var msgs []workflow.Message
	a.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 1 || msgs[0].Agent != "a" || msgs[0].Content != "a's work" {
		t.Fatalf("messages: %+v; want a's answer only", msgs)
	}
	for _, e := range a.trace(id) {
		if e.Agent == "b" {
			t.Fatalf("the trace has b's %s event: %+v", e.Type, e)
		}
	}
}
