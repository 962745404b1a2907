package khala

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// GET /v1/agents lists the enrolled agents by name: when each enrolled,
// was last seen making a request (null: not yet), and the turns leased to
// it (null: none). An agent's token or the local admin token reads it; a
// person's is refused. What this server saw is kept across a restart, and
// seen by another replica of the database.
func TestListAgents(t *testing.T) { eachBackend(t, testListAgents) }

func testListAgents(t *testing.T, bk backend) {
	admin := &client{token: "khala_admin_list"}
	tune := func(o *Options) { o.AdminToken = hashToken(admin.token) }
	ts := bk.server(t, tune)
	admin.ts = ts
	start := time.Now().UTC()
	a, b := ts.agent("a"), ts.agent("b")
	a.putWorkflow(panelWF)
	a.start("panel", nil, "")
	ta := a.claimOne()
	list := func(c *client) map[string]agentJSON {
		t.Helper()
		var out []agentJSON
		c.must("GET", "/v1/agents", nil, 200, &out)
		byName := map[string]agentJSON{}
		var names []string
		for _, aj := range out {
			byName[aj.Name], names = aj, append(names, aj.Name)
		}
		if !slices.Equal(names, []string{"a", "b"}) {
			t.Fatalf("agents %v, want a, b", names)
		}
		return byName
	}
	got := list(admin)
	ga, gb := got["a"], got["b"]
	if ga.EnrolledAt.Before(start.Add(-time.Second)) || ga.LastSeen == nil || ga.LastSeen.Before(ga.EnrolledAt) ||
		!slices.Equal(ga.TurnsHeld, []string{ta.Turn}) {
		t.Fatalf("a: %+v; want enrolled and seen since %s, holding %s", ga, start, ta.Turn)
	}
	if gb.LastSeen != nil || gb.TurnsHeld != nil {
		t.Fatalf("b, enrolled only: %+v; want last_seen and turns_held null", gb)
	}
	// b asks: it is seen now; a answers: it holds nothing.
	if gb = list(b)["b"]; gb.LastSeen == nil {
		t.Fatalf("b after a request: %+v; want it seen", gb)
	}
	if s, d := a.respond(ta, "seen", nil); s != 200 {
		t.Fatalf("answer: %d %s", s, d)
	}
	tb := b.claimOne()
	got = list(admin)
	if ga, gb = got["a"], got["b"]; ga.TurnsHeld != nil || !slices.Equal(gb.TurnsHeld, []string{tb.Turn}) {
		t.Fatalf("after a's answer and b's claim of %s: a %+v, b %+v", tb.Turn, ga, gb)
	}
	// A person reads threads, not the fleet.
	alice := ts.person("alice")
	if s, d := alice.do("GET", "/v1/agents", nil); s != http.StatusForbidden || errCode(d) != codeForbidden {
		t.Fatalf("a person's token: %d %s", s, d)
	}
	// Another replica (or this server restarted) sees when they were last
	// seen once this one has stored it; the admin's request is nobody's.
	ts.stop()
	other := newServerOn(t, ts.reopen(t), tune)
	admin.ts = other
	again := list(admin)
	for _, name := range []string{"a", "b"} {
		if was, now := got[name].LastSeen, again[name].LastSeen; now == nil || !now.Equal(*was) {
			t.Errorf("%s last seen %v after the restart, want %v", name, now, was)
		}
	}
	if !slices.Equal(again["b"].TurnsHeld, []string{tb.Turn}) {
		t.Errorf("b after the restart: %+v", again["b"])
	}
}
