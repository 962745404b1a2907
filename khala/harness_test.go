package khala

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// testServer is a Khala server on a loopback port over a backend's
// fresh store: requests really cross a connection.
type testServer struct {
	t      testing.TB
	URL    string
	srv    *Server
	store  khaladb.Storage
	enroll string
	client *http.Client
	stop   func()
	// reopen opens another store over the same data: the server
	// restarted, or another replica.
	reopen func(testing.TB) khaladb.Storage
}

// newTestServer is a server on bbolt, for what is about the server
// rather than its storage.
func newTestServer(t testing.TB, tune ...func(*Options)) *testServer {
	t.Helper()
	return backends[0].server(t, tune...)
}

// server starts a test server on a fresh store of bk.
func (bk backend) server(t testing.TB, tune ...func(*Options)) *testServer {
	t.Helper()
	store, reopen := bk.open(t)
	ts := newServerOn(t, store, tune...)
	ts.reopen = reopen
	et, err := IssueEnrollToken(t.Context(), store, 1000, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ts.enroll = et.Token
	return ts
}

// newServerOn serves an open store; stop (also run at cleanup) shuts the
// server down and closes the store.
func newServerOn(t testing.TB, store khaladb.Storage, tune ...func(*Options)) *testServer {
	t.Helper()
	lw := &logWriter{t: t}
	t.Cleanup(func() { lw.mu.Lock(); lw.done = true; lw.mu.Unlock() })
	o := Options{Store: store, Version: "test", Logger: slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	o.WebhookAllow = loopbackWebhooks // the receivers of the tests listen there
	for _, f := range tune {
		f(&o)
	}
	srv := New(o)
	hs := httptest.NewServer(srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.BeginShutdown()
			hs.Close()
			cancel()
			<-done
			store.Close()
		})
	}
	t.Cleanup(stop)
	return &testServer{t: t, URL: hs.URL, srv: srv, store: store, client: hs.Client(), stop: stop}
}

// client is one agent's view of the server.
type client struct {
	ts    *testServer
	name  string
	token string
}

// agent enrolls a new agent.
func (ts *testServer) agent(name string) *client {
	ts.t.Helper()
	c := &client{ts: ts, token: ts.enroll}
	var out struct{ Agent, Token string }
	c.must("POST", "/v1/agents", map[string]string{"name": name}, 201, &out)
	if out.Agent != name || !strings.HasPrefix(out.Token, prefixAgent) {
		ts.t.Fatalf("enroll %s: got %+v", name, out)
	}
	return &client{ts: ts, name: name, token: out.Token}
}

// do sends a request; body is JSON-encoded unless it is a string or []byte.
func (c *client) do(method, path string, body any) (int, []byte) {
	c.ts.t.Helper()
	return c.send(method, path, "application/json", body)
}

func (c *client) send(method, path, ctype string, body any) (int, []byte) {
	c.ts.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.ts.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.ts.URL+path, r)
	if err != nil {
		c.ts.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := c.ts.client.Do(req)
	if err != nil {
		c.ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// must sends a request and fails the test unless the status is want; the
// body is decoded into out when given.
func (c *client) must(method, path string, body any, want int, out any) []byte {
	c.ts.t.Helper()
	status, data := c.do(method, path, body)
	if status != want {
		c.ts.t.Fatalf("%s %s: want %d, got %d: %s", method, path, want, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.ts.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return data
}

// errCode returns the error code of an error body.
func errCode(data []byte) string {
	var eb errorBody
	json.Unmarshal(data, &eb)
	return eb.Error.Code
}

func (c *client) putWorkflow(src string) {
	c.ts.t.Helper()
	def, err := workflow.ParseSource("test", []byte(src))
	if err != nil {
		c.ts.t.Fatal(err)
	}
	status, data := c.do("PUT", "/v1/workflows/"+def.Name, map[string]string{"source": src})
	if status != 200 && status != 201 {
		c.ts.t.Fatalf("put %s: %d %s", def.Name, status, data)
	}
}

func (c *client) start(wf string, input map[string]any, webhook string) string {
	c.ts.t.Helper()
	var out startResponse
	c.must("POST", "/v1/workflows/"+wf+"/threads", map[string]any{"input": input, "webhook": webhook}, 201, &out)
	return out.Thread
}

func (c *client) claim(req map[string]any) []api.Turn {
	c.ts.t.Helper()
	var out []api.Turn
	c.must("POST", "/v1/turns/claim", req, 200, &out)
	return out
}

// claimOne claims exactly one turn, waiting up to 5s for it.
func (c *client) claimOne() api.Turn {
	c.ts.t.Helper()
	got := c.claim(map[string]any{"max": 1, "wait": "5s"})
	if len(got) != 1 {
		c.ts.t.Fatalf("%s: want one turn, got %d", c.name, len(got))
	}
	return got[0]
}

func (c *client) respond(t api.Turn, content string, meta any) (int, []byte) {
	c.ts.t.Helper()
	return c.do("POST", "/v1/turns/"+t.Turn+"/response", map[string]any{"claim": t.Claim, "content": content, "meta": meta})
}

func (c *client) thread(id string) threadJSON {
	c.ts.t.Helper()
	var out struct {
		workflow.Thread
		Turns []turnJSON `json:"turns"`
	}
	c.must("GET", "/v1/threads/"+id, nil, 200, &out)
	return threadJSON{Thread: &out.Thread, Turns: out.Turns}
}

func (c *client) trace(id string) []workflow.Event {
	c.ts.t.Helper()
	var out []workflow.Event
	c.must("GET", "/v1/threads/"+id+"/trace", nil, 200, &out)
	return out
}

// waitFor polls cond until it holds or 5s pass: for effects of the
// sweeper, which runs on its own clock.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitParked waits until n long polls wait on ts for a turn.
func (ts *testServer) waitParked(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d long polls to wait", n), func() bool { return ts.srv.engine.Parked() == n })
}

func eventTypes(evs []workflow.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

// Test workflows.

// pairWF alternates author and reviewer until input.turns answers.
const pairWF = `workflow: pair
binding: cloud
description: author and reviewer take turns
moderator: |
  $count(messages) >= input.turns
    ? {"done": true, "result": {"turns": $count(messages), "last": last.content}}
    : {"role": $count(messages) % 2 = 0 ? "author" : "reviewer", "instruction": "turn " & ($count(messages) + 1)}
inputs:
  turns: {type: integer, default: 2}
roles:
  author: {prompt: You write the change.}
  reviewer: {prompt: You review the change.}
`

// panelWF asks two reviewers in parallel, then ends.
const panelWF = `workflow: panel
binding: cloud
moderator: |
  $count(messages) = 0
    ? [{"role": "a", "instruction": "look at it"}, {"role": "b", "instruction": "look too"}]
    : {"done": true, "result": messages.content}
roles:
  a: {prompt: Reviewer A.}
  b: {prompt: Reviewer B.}
`

// leaseWF has short leases, for expiry tests.
func leaseWF(claim string, attempts int, idle string) string {
	return fmt.Sprintf(`workflow: lease
binding: cloud
moderator: |
  $count(messages) = 0 ? {"role": "worker", "instruction": "work"} : {"done": true}
roles:
  worker: {prompt: You work.}
limits:
  claim: %s
  max_attempts: %d
  idle: %s
`, claim, attempts, idle)
}
