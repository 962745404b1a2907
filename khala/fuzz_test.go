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

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
