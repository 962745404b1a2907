package khala

import (
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
)

func TestBlockingNotices(t *testing.T) { eachBackend(t, testBlockingNotices) }

// A blocking notice stands (GET /v1/notices, the console's inbox) until
// the thread's next turn starts: past the answer of the turn that sent
// it, while the next turn is only queued, and gone once it is claimed.
// An info notice is never listed.
func testBlockingNotices(t *testing.T, bk backend) {
	ts := bk.server(t, withPerson)
	a := ts.agent("laptop")
	alice := ts.person("alice")
	a.putWorkflow(pairWF)
	id := a.start("pair", map[string]any{"turns": 3}, "")
	held := a.claimOne()
	notices := func() []api.Notice {
		t.Helper()
		var out []api.Notice
		alice.must("GET", "/v1/notices", nil, 200, &out)
		return out
	}
	if ns := notices(); len(ns) != 0 {
		t.Fatalf("notices before any: %+v", ns)
	}
	a.must("POST", "/v1/turns/"+held.Turn+"/events", api.TurnEvents{Claim: held.Claim, Events: []api.TurnEvent{
		{Type: api.EventNotify, Status: api.NotifyInfo, Message: "just so you know"},
		{Type: api.EventNotify, Status: api.NotifyBlocking, Message: "need the staging password"},
	}}, 200, nil)
	want := func(what string) {
		t.Helper()
		ns := notices()
		if len(ns) != 1 || ns[0].Thread != id || ns[0].Ref != "pair#"+id || ns[0].Step != 1 || ns[0].Role != "author" ||
			ns[0].Agent != "laptop" || ns[0].Level != api.NotifyBlocking || ns[0].Message != "need the staging password" {
			t.Fatalf("%s: notices %+v, want the blocking one", what, ns)
		}
	}
	want("while its turn runs")
	b := newBrowser(t, ts.URL)
	b.signIn(testPerson)
	if _, page := b.get("/inbox"); !strings.Contains(page, `id="notice-`+id+`-1"`) || !strings.Contains(page, "need the staging password") ||
		strings.Contains(page, "just so you know") {
		t.Fatalf("the console's inbox lacks the blocking notice:\n%s", page)
	}
	if s, body := a.respond(held, "done", nil); s != 200 {
		t.Fatalf("respond: %d %s", s, body)
	}
	want("its turn answered, the next one queued")
	a.claimOne()
	if ns := notices(); len(ns) != 0 {
		t.Fatalf("the next turn started: notices %+v", ns)
	}
	if _, page := b.get("/inbox"); strings.Contains(page, "need the staging password") {
		t.Fatalf("the console's inbox keeps the notice after the next turn started:\n%s", page)
	}
}
