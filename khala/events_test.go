package khala

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// readSSE opens a thread's event stream and returns its events as they
// come; the channel closes when the server ends the stream.
func readSSE(t *testing.T, c *client, id, lastID string) <-chan workflow.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.ts.URL+"/v1/threads/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan workflow.Event, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				var e workflow.Event
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
					t.Errorf("bad event %q: %v", line, err)
					return
				}
				if id == "" {
					t.Errorf("event without id: %s", line)
				}
				out <- e
			}
		}
	}()
	return out
}

func collect(t *testing.T, ch <-chan workflow.Event) []workflow.Event {
	t.Helper()
	var evs []workflow.Event
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return evs
			}
			evs = append(evs, e)
		case <-timeout:
			t.Fatalf("stream did not end; got %s", eventTypes(evs))
		}
	}
}

func TestEventStream(t *testing.T) { eachBackend(t, testEventStream) }

func testEventStream(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	stream := readSSE(t, a, id, "")
	// The events so far arrive at once; later ones as they are committed.
	if e := <-stream; e.Type != workflow.EventThreadStarted {
		t.Fatalf("first event: %+v", e)
	}
	for range 2 {
		tk := a.claimOne()
		a.respond(tk, "ok", nil)
	}
	live := collect(t, stream)
	trace := a.trace(id)
	if len(live)+1 != len(trace) || live[len(live)-1].Type != workflow.EventThreadEnded {
		t.Fatalf("stream %s\ntrace %s", eventTypes(live), eventTypes(trace))
	}
	for i, e := range live {
		if e.Seq != trace[i+1].Seq || e.Type != trace[i+1].Type || e.Claim != trace[i+1].Claim {
			t.Fatalf("stream event %d %+v differs from trace %+v", i, e, trace[i+1])
		}
	}
	// A reconnect resumes after the last event seen, and ends at the end.
	resumed := collect(t, readSSE(t, a, id, "5"))
	if len(resumed) != len(trace)-5 || resumed[0].Seq != 6 {
		t.Fatalf("resumed: %s", eventTypes(resumed))
	}
	if got := collect(t, readSSE(t, a, id, "99")); len(got) != 0 {
		t.Fatalf("past the end: %+v", got)
	}
}

func TestRestartKeepsState(t *testing.T) { eachBackend(t, testRestartKeepsState) }

func testRestartKeepsState(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	tk := a.claimOne()

	// A new server on the same file, after this one stopped.
	ts.stop()
	srv2 := newServerOn(t, ts.reopen(t))
	b := &client{ts: srv2, token: a.token, name: "a"}
	// The lease survived: its holder answers through the new server.
	if s, d := b.respond(tk, "after restart", nil); s != 200 {
		t.Fatalf("respond after restart: %d %s", s, d)
	}
	next := b.claimOne()
	if next.Step != 2 || next.Thread != id {
		t.Fatalf("next turn: %+v", next)
	}
	if got := eventTypes(b.trace(id)); !strings.HasPrefix(got, "thread.started turn.queued turn.started turn.answered turn.queued turn.started") {
		t.Fatalf("trace: %s", got)
	}
}

func TestMetrics(t *testing.T) { eachBackend(t, testMetrics) }

func testMetrics(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	a.start("pair", nil, "")
	a.start("pair", nil, "")
	tk := a.claimOne()
	a.respond(tk, "ok", nil)
	_, data := a.do("GET", "/metrics", nil)
	text := string(data)
	for _, want := range []string{
		"khala_queue_depth 2\n", "khala_turns_leased 0\n", "khala_threads_running 2\n", "khala_claims_waiting 0\n",
		"khala_threads_started_total 2\n", "khala_turns_claimed_total 1\n", "khala_turns_answered_total 1\n",
		`khala_turns_requeued_total{reason="expired"} 0`, "# TYPE khala_claim_wait_seconds histogram",
		`khala_claim_wait_seconds_bucket{le="+Inf"} 1`, "khala_turn_duration_seconds_count 1\n",
		`khala_http_requests_total{code="201"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if bk.name == "postgres" {
		// One claim and one answer, each in a statement of its own.
		for _, want := range []string{`khala_pg_writes_total{kind="claim"} 1`, `khala_pg_statements_total{kind="claim"} 1`,
			`khala_pg_writes_total{kind="answer"} 1`, `khala_pg_statements_total{kind="answer"} 1`} {
			if !strings.Contains(text, want+"\n") {
				t.Errorf("metrics lack %q", want)
			}
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}
