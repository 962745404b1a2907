package khala

import (
	"strings"
	"testing"
	"time"
)

// endpoint is one row of the API table, with a body that would be valid.
type endpoint struct {
	method, path string
	body         any
	auth         int
}

func endpoints(thread, turn string) []endpoint {
	claim := map[string]string{"claim": "c"}
	return []endpoint{
		{"POST", "/v1/agents", map[string]string{"name": "newcomer"}, authEnroll},
		{"GET", "/v1/agents", nil, authFleet},
		{"GET", "/v1/agents/me", nil, authAgent},
		{"POST", "/v1/admin/enroll-tokens", map[string]int{"uses": 1}, authAdmin},
		{"GET", "/v1/workflows", nil, authAgent},
		{"GET", "/v1/workflows/pair", nil, authAgent},
		{"PUT", "/v1/workflows/pair", map[string]string{"source": pairWF}, authFleet},
		{"POST", "/v1/workflows/pair/threads", map[string]any{}, authFleet},
		{"GET", "/v1/threads", nil, authAgent},
		{"GET", "/v1/threads/" + thread, nil, authAgent},
		{"POST", "/v1/threads/" + thread + "/cancel", nil, authCancel},
		{"GET", "/v1/threads/" + thread + "/messages", nil, authAgent},
		{"GET", "/v1/threads/" + thread + "/trace", nil, authAgent},
		{"GET", "/v1/threads/" + thread + "/events", nil, authAgent},
		{"POST", "/v1/turns/claim", map[string]any{}, authAgent},
		{"POST", "/v1/turns/" + turn + "/heartbeat", claim, authAgent},
		{"POST", "/v1/turns/" + turn + "/response", claim, authAgent},
		{"POST", "/v1/turns/" + turn + "/release", claim, authAgent},
		{"GET", "/metrics", nil, authAgent},
	}
}

func TestAuthMatrix(t *testing.T) { eachBackend(t, testAuthMatrix) }

func testAuthMatrix(t *testing.T, bk backend) {
	ts := bk.server(t, func(o *Options) { o.AdminToken = hashToken("khala_admin_real") })
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	tk := a.claimOne()

	wrongAgent, _ := newToken(prefixAgent)
	wrongEnroll, _ := newToken(prefixEnroll)
	creds := map[string]string{
		"no token":          "",
		"wrong agent token": wrongAgent,
		"wrong enroll":      wrongEnroll,
		"not a token":       "hello",
		"admin token":       "khala_admin_real",
		"agent token":       a.token,
		"enrollment token":  ts.enroll,
	}
	// allowed says which credentials an auth kind accepts.
	allowed := map[int]map[string]bool{
		authAgent:  {"agent token": true},
		authEnroll: {"enrollment token": true},
		authAdmin:  {"admin token": true},
		authFleet:  {"agent token": true, "admin token": true},
		authCancel: {"agent token": true, "admin token": true},
	}
	for _, ep := range endpoints(id, tk.Turn) {
		for name, tok := range creds {
			if allowed[ep.auth][name] {
				continue
			}
			c := &client{ts: ts, token: tok}
			status, data := c.do(ep.method, ep.path, ep.body)
			if status != 401 || errCode(data) != codeUnauthorized {
				t.Errorf("%s %s with %s: want 401 unauthorized, got %d %s", ep.method, ep.path, name, status, data)
			}
			if tok != "" && strings.Contains(string(data), tok) {
				t.Errorf("%s %s echoed the token", ep.method, ep.path)
			}
		}
	}
	// Health alone takes no token.
	anon := &client{ts: ts}
	anon.must("GET", "/v1/health", nil, 200, nil)
	// Nothing changed under all those refused requests.
	if th := a.thread(id); th.Status != "running" || len(th.Turns) != 1 || th.Turns[0].Agent != "a" {
		t.Fatalf("thread changed: %+v", th.Thread)
	}
}

func TestEnrollmentTokens(t *testing.T) { eachBackend(t, testEnrollmentTokens) }

func testEnrollmentTokens(t *testing.T, bk backend) {
	ts := bk.server(t)
	ctx := t.Context()
	once, err := IssueEnrollToken(ctx, ts.store, 1, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &client{ts: ts, token: once.Token}
	c.must("POST", "/v1/agents", map[string]string{"name": "first"}, 201, nil)
	s, d := c.do("POST", "/v1/agents", map[string]string{"name": "second"})
	if s != 401 || !strings.Contains(string(d), "used up") {
		t.Fatalf("a used token: %d %s", s, d)
	}
	old, err := IssueEnrollToken(ctx, ts.store, 5, time.Minute, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c = &client{ts: ts, token: old.Token}
	if s, d := c.do("POST", "/v1/agents", map[string]string{"name": "late"}); s != 401 || !strings.Contains(string(d), "expired") {
		t.Fatalf("an expired token: %d %s", s, d)
	}
	// A taken name is 409 and does not use the token up.
	two, _ := IssueEnrollToken(ctx, ts.store, 1, 0, time.Now())
	c = &client{ts: ts, token: two.Token}
	if s, d := c.do("POST", "/v1/agents", map[string]string{"name": "first"}); s != 409 || errCode(d) != codeNameTaken {
		t.Fatalf("a taken name: %d %s", s, d)
	}
	c.must("POST", "/v1/agents", map[string]string{"name": "third"}, 201, nil)
	for _, bad := range []string{"", "-x", "a b", strings.Repeat("x", 65), "ünï", "admin"} {
		if s, _ := (&client{ts: ts, token: ts.enroll}).do("POST", "/v1/agents", map[string]string{"name": bad}); s != 400 {
			t.Errorf("agent name %q: want 400, got %d", bad, s)
		}
	}
}
