package khala

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/khala/khaladb/khalabolt"

	"github.com/nerve-agents/nerve/workflow"
)

// fuzzEndpoints are the routes whose bodies FuzzRequestDecoding feeds.
var fuzzEndpoints = []struct{ method, path string }{
	{"POST", "/v1/turns/claim"},
	{"POST", "/v1/turns/thread-1.1/response"},
	{"POST", "/v1/turns/thread-1.1/heartbeat"},
	{"POST", "/v1/turns/thread-1.1/release"},
	{"PUT", "/v1/workflows/pair"},
	{"POST", "/v1/workflows/pair/threads"},
	{"POST", "/v1/agents"},
	{"POST", "/v1/threads/thread-1/cancel"},
}

// Any body to any endpoint gets a status below 500 and, when refused, the
// documented error shape; the server never panics.
func FuzzRequestDecoding(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{`, `null`, `[]`, `"x"`, `{"max": 3, "wait": "1ms"}`, `{"wait": 1e308}`, `{"wait": -1e308}`,
		`{"max": 1e20}`, `{"claim": "c", "content": "x", "meta": {"a": [1, 2]}, "error": "boom"}`,
		`{"claim": "c", "error": {"kind": "extract", "message": "m"}}`, `{"claim": ""}`,
		`{"source": "workflow: pair\nroles: {a: {prompt: x}}\nmoderator: '{\"done\": true}'"}`,
		`{"input": {"turns": "x"}, "webhook": "http://[::1"}`, `{"name": "a\u0000b"}`, `{} trailing`,
		"\xff\xfe", `{"workflows": [1]}`, `{"roles": null, "max": 0}`,
	} {
		for i := range fuzzEndpoints {
			f.Add(uint8(i), []byte(seed))
		}
	}
	store, err := khalabolt.Open(filepath.Join(f.TempDir(), "khala.db"), time.Second)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	srv := New(Options{Store: store, MaxWait: time.Millisecond, MaxBody: 64 << 10})
	h := srv.Handler()
	ctx := context.Background()
	et, _ := IssueEnrollToken(ctx, store, 1<<30, 0, time.Now())
	agentTok, agentHash := newToken(prefixAgent)
	if err := store.Enroll(ctx, hashToken(et.Token), khaladb.Agent{Name: "fuzzer", Token: agentHash, EnrolledAt: time.Now()}); err != nil {
		f.Fatal(err)
	}
	setup := httptest.NewRecorder()
	req := httptest.NewRequest("PUT", "/v1/workflows/pair", strings.NewReader(mustJSON(map[string]string{"source": pairWF})))
	req.Header.Set("Authorization", "Bearer "+agentTok)
	h.ServeHTTP(setup, req)
	if setup.Code != 201 {
		f.Fatalf("setup: %d %s", setup.Code, setup.Body)
	}

	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := fuzzEndpoints[int(which)%len(fuzzEndpoints)]
		req := httptest.NewRequest(ep.method, ep.path, strings.NewReader(string(body)))
		tok := agentTok
		if ep.path == "/v1/agents" {
			tok = et.Token
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", ep.method, ep.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var eb errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%s %s %q: error body %s", ep.method, ep.path, body, rec.Body)
			}
		}
	})
}

// fuzzModerator reads the answer the way real moderators do: meta fields,
// the error, string joins and comparisons on agent-controlled values.
const fuzzModerator = `workflow: review
binding: cloud
moderator: |
  (
    $findings := $join(last.meta.findings, "; ");
    last.error ? {"fail": "the " & last.role & " failed: " & last.error.message}
    : last.meta.approved = true ? {"done": true, "result": {"rounds": $count(messages), "content": last.content}}
    : $count(messages) >= 5 ? {"fail": "not approved: " & $findings}
    : last.meta.next ? {"role": last.meta.next, "instruction": $string(last.meta.instruction)}
    : {"role": "reviewer", "instruction": "again: " & $findings & " " & last.content}
  )
roles:
  reviewer: {prompt: You review.}
limits:
  max_steps: 10
`

// Whatever an agent answers, the moderator's verdict is a next turn, an
// end, or a failure that names the workflow; never a panic or a thread
// left without a way forward.
func FuzzModeratorInput(f *testing.F) {
	for _, s := range []struct{ content, meta, err string }{
		{"looks fine", `{"approved": true}`, ""},
		{"", `{"approved": false, "findings": ["a", "b"]}`, ""},
		{"x", `{"findings": [1, {"a": null}], "approved": "yes"}`, ""},
		{"x", `{"next": "reviewer", "instruction": {"deep": [1,2,3]}}`, ""},
		{"x", `{"next": "ghost"}`, ""},
		{"x", `{"next": 42}`, ""},
		{"x", `[1, 2, 3]`, ""},
		{"x", `"just a string"`, ""},
		{"x", `null`, "adapter died"},
		{"\x00\xff", `{"findings": "not a list"}`, ""},
		{strings.Repeat("long ", 1000), `{"approved": 1e308}`, ""},
		{"x", `not json`, ""},
	} {
		f.Add(s.content, []byte(s.meta), s.err)
	}
	def, err := workflow.ParseSource("fuzz", []byte(fuzzModerator))
	if err != nil {
		f.Fatal(err)
	}
	hash := sourceHash([]byte(fuzzModerator))
	defs := newDefCache(nil)
	defs.put(hash, def)
	f.Fuzz(func(t *testing.T, content string, meta []byte, errMsg string) {
		now := time.Now().UTC()
		c, err := startThread(context.Background(), def, hash, "thread-1", map[string]any{}, nil, "", "fuzzer", nil, 0, fuzzRouting(), now)
		if err != nil || len(c.Turns) != 1 {
			t.Fatalf("start: %v %+v", err, c)
		}
		tk := c.Turns[0]
		tk.State, tk.Claim, tk.Agent, tk.ClaimedAt, tk.LeaseExpires = khaladb.TurnClaimed, "claim", "fuzzer", now, now.Add(time.Minute)
		v := &khaladb.ThreadView{Thread: c.Thread, Turns: []khaladb.Turn{tk}}
		m := workflow.Message{Content: content}
		if json.Valid(meta) {
			json.Unmarshal(meta, &m.Meta)
		}
		if errMsg != "" {
			m.Error = &workflow.MessageError{Kind: "agent", Message: errMsg}
		}
		ch, err := answer(context.Background(), defs, nil, v, tk.ID, answerRequest{Claim: "claim", Agent: "fuzzer", Message: m}, fuzzRouting(), now)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		th := ch.Thread
		switch th.Status {
		case workflow.StatusRunning:
			if len(th.Pending) == 0 || len(ch.Turns) < 2 {
				t.Fatalf("running with nothing queued: %+v", th)
			}
		case workflow.StatusCompleted:
		case workflow.StatusFailed:
			if th.Error == "" {
				t.Fatal("failed without a reason")
			}
		default:
			t.Fatalf("status %q", th.Status)
		}
		if _, err := json.Marshal(ch); err != nil {
			t.Fatalf("the change cannot be stored: %v", err)
		}
	})
}

// fuzzRouting has ids for any child threads a moderator may start.
func fuzzRouting() routing {
	return routing{ids: &reservedIDs{ids: []string{"thread-2", "thread-3", "thread-4", "thread-5"}}}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
