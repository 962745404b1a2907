package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nerve-agents/nerve/internal/telemetry"
)

// otelEnv points every nerve process of the test at rc. The batch delay
// is a minute: spans arrive only because shutdown flushes them.
func otelEnv(t *testing.T, rc *otlpReceiver) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	t.Setenv("OTEL_SERVICE_NAME", "")
}

// waitSpans waits until ok holds of the received spans, and fails on any
// export request the receiver could not decode.
func waitSpans(t *testing.T, rc *otlpReceiver, what string, ok func([]gotSpan) bool) []gotSpan {
	t.Helper()
	var spans []gotSpan
	waitFor(t, what, func() bool {
		var bad []string
		spans, bad = rc.snapshot()
		if len(bad) > 0 {
			t.Fatalf("bad export requests: %v", bad)
		}
		return ok(spans)
	})
	return spans
}

func one(t *testing.T, spans []gotSpan, service, name string) gotSpan {
	t.Helper()
	got := findSpans(spans, service, name)
	if len(got) != 1 {
		t.Fatalf("want one %s span %q, got %d of %d spans: %+v", service, name, len(got), len(spans), spans)
	}
	return got[0]
}

func wantAttrs(t *testing.T, s gotSpan, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if s.Attrs[k] != v {
			t.Errorf("span %q: %s = %#v, want %#v (all: %v)", s.Name, k, s.Attrs[k], v, s.Attrs)
		}
	}
}

func threadTrace(key string) (string, string) {
	tid, sid := telemetry.ThreadIDs(key)
	return hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:])
}

// A local thread run by the real daemon is one trace: the thread's root
// span, a span per turn under it with the turn's attributes, the
// adapter's run under each turn.
func TestE2EOTelLocalThread(t *testing.T) {
	rc := startOTLPReceiver(t)
	otelEnv(t, rc)
	e := newEnv(t)
	e.write("bin/claude-ok", fmt.Sprintf("#!/bin/sh\ncat %s/claude-success.jsonl\n", repoFile(t, "adapter/testdata")))
	e.write("nerve.yaml", fmt.Sprintf(`agent: {name: otel-agent}
adapters:
  claude-ok: {type: claude, binary: %s/bin/claude-ok}
  broken: {type: exec, command: [sh, -c, "echo no >&2; exit 3"]}
daemon: {shutdown_grace: 1s}
sandbox: {read: [%s]} # the captured stream claude-ok prints
`, e.home, repoFile(t, "adapter/testdata")))
	wf := e.write("traced.yaml", `workflow: traced
moderator: 'last = null ? {"role": "author"} : last.role = "author" ? {"role": "reviewer"} : {"done": true}'
roles:
  author: {adapter: claude-ok, prompt: write}
  reviewer: {adapter: broken, prompt: review}
`)
	r := e.must(0, "workflow", "run", wf, "--json")
	if out := decodeRun(t, r); out.Thread != "traced#thread-1" || out.Status != "completed" {
		t.Fatalf("run: %s", r)
	}
	// A child thread (no turns of its own) is a trace linked to its
	// parent's.
	e.write("leaf.yaml", "workflow: leaf\nmoderator: '{\"done\": true}'\nroles: {r: {adapter: broken, prompt: p}}\n")
	nest := e.write("nest.yaml", "workflow: nest\nmoderator: 'last = null ? {\"workflow\": \"leaf\"} : {\"done\": true}'\nroles: {r: {adapter: broken, prompt: p}}\n")
	if out := decodeRun(t, e.must(0, "workflow", "run", nest, "--json")); out.Thread != "nest#thread-2" || out.Status != "completed" {
		t.Fatalf("run nest: %+v", out)
	}
	// A person's turn is a span too, naming who answered.
	asks := e.write("asks.yaml", "workflow: asks\nmoderator: 'last = null ? {\"role\": \"approver\"} : {\"done\": true}'\n"+
		"roles: {approver: {human: true, prompt: approve}}\n")
	e.must(0, "workflow", "run", asks, "--detach")
	waitInbox(t, e, 1)
	var res answerJSON
	if err := json.Unmarshal([]byte(e.must(0, "thread", "answer", "asks#thread-4", "fine", "--json").stdout), &res); err != nil || res.By == "" {
		t.Fatalf("answer --json: %v %+v", err, res)
	}
	e.must(0, "workflow", "logs", "asks#thread-4", "-f")
	if spans, _ := rc.snapshot(); len(spans) != 0 {
		t.Fatalf("spans before shutdown despite a minute's batch delay: %+v", spans)
	}
	e.must(0, "daemon", "stop", "--timeout", "20s") // SIGTERM: the daemon flushes its spans
	spans := waitSpans(t, rc, "the thread's spans", func(s []gotSpan) bool {
		return len(findSpans(s, "nerve-daemon", "thread traced")) > 0 && len(findSpans(s, "nerve-daemon", "thread leaf")) > 0 &&
			len(findSpans(s, "nerve-daemon", "thread asks")) > 0
	})

	host, _ := os.Hostname()
	traceID, rootID := threadTrace(telemetry.ThreadKey(host+":"+e.home, "thread-1"))
	nestTrace, nestRoot := threadTrace(telemetry.ThreadKey(host+":"+e.home, "thread-2"))
	leafTrace, _ := threadTrace(telemetry.ThreadKey(host+":"+e.home, "thread-3"))
	nestSpan, leaf := one(t, spans, "nerve-daemon", "thread nest"), one(t, spans, "nerve-daemon", "thread leaf")
	if leaf.Trace != leafTrace || leaf.Parent != "" || len(leaf.Links) != 1 || leaf.Links[0] != nestTrace+"/"+nestRoot ||
		nestSpan.ID != nestRoot || len(nestSpan.Links) != 0 {
		t.Errorf("the child's root span %+v, want a trace of its own linked to its parent's root %+v", leaf, nestSpan)
	}
	wantAttrs(t, leaf, map[string]any{"nerve.parent": "nest#thread-2", "nerve.thread": "thread-3"})
	// The step that waited for the child is a span of nest's trace.
	childTurn := one(t, spans, "nerve-daemon", "child leaf")
	if childTurn.Trace != nestTrace || childTurn.Parent != nestRoot || childTurn.StatusError {
		t.Errorf("the child turn's span %+v, want one under nest's root %s", childTurn, nestRoot)
	}
	wantAttrs(t, childTurn, map[string]any{"nerve.turn_kind": "child", "nerve.step": int64(1), "nerve.thread": "thread-2",
		"nerve.child_workflow": "leaf", "nerve.child": "leaf#thread-3", "nerve.outcome": "answered"})
	asksTrace, asksRoot := threadTrace(telemetry.ThreadKey(host+":"+e.home, "thread-4"))
	approver := one(t, spans, "nerve-daemon", "turn approver")
	if approver.Trace != asksTrace || approver.Parent != asksRoot {
		t.Errorf("the person's turn's span %+v, want one under asks' root %s", approver, asksRoot)
	}
	wantAttrs(t, approver, map[string]any{"nerve.turn_kind": "human", "nerve.role": "approver", "nerve.step": int64(1),
		"nerve.agent": res.By, "nerve.outcome": "answered"})
	spans = slices.DeleteFunc(spans, func(s gotSpan) bool {
		return s.Name == "thread nest" || s.Name == "thread leaf" || s.Name == "child leaf" || s.Name == "thread asks" || s.Name == "turn approver"
	})
	thread := one(t, spans, "nerve-daemon", "thread traced")
	author := one(t, spans, "nerve-daemon", "turn author")
	reviewer := one(t, spans, "nerve-daemon", "turn reviewer")
	runA := one(t, spans, "nerve-daemon", "adapter claude-ok")
	runR := one(t, spans, "nerve-daemon", "adapter broken")
	for _, s := range []gotSpan{thread, author, reviewer, runA, runR} {
		if s.Trace != traceID {
			t.Errorf("span %q in trace %s, want the thread's %s", s.Name, s.Trace, traceID)
		}
	}
	if thread.ID != rootID || thread.Parent != "" || thread.StatusError {
		t.Errorf("thread span: %+v, want root %s", thread, rootID)
	}
	wantAttrs(t, thread, map[string]any{"nerve.thread": "thread-1", "nerve.workflow": "traced", "nerve.status": "completed"})
	for _, c := range []struct{ child, parent gotSpan }{{author, thread}, {reviewer, thread}, {runA, author}, {runR, reviewer}} {
		if c.child.Parent != c.parent.ID {
			t.Errorf("span %q: parent %s, want %q (%s)", c.child.Name, c.child.Parent, c.parent.Name, c.parent.ID)
		}
		if c.child.StartNanos < c.parent.StartNanos || c.child.EndNanos > c.parent.EndNanos {
			t.Errorf("span %q is not within %q", c.child.Name, c.parent.Name)
		}
	}
	wantAttrs(t, author, map[string]any{"nerve.turn_kind": "agent", "nerve.role": "author", "nerve.agent": "otel-agent", "nerve.adapter": "claude-ok",
		"nerve.step": int64(1), "nerve.thread": "thread-1", "nerve.workflow": "traced",
		"gen_ai.response.model": "claude-opus-5-5", "gen_ai.usage.input_tokens": int64(120),
		"gen_ai.usage.output_tokens": int64(7), "nerve.cost_usd": 0.00062, "nerve.outcome": "answered"})
	if author.StatusError || author.Attrs["error.type"] != nil {
		t.Errorf("author's turn succeeded: %+v", author)
	}
	wantAttrs(t, reviewer, map[string]any{"nerve.role": "reviewer", "nerve.adapter": "broken", "nerve.step": int64(2),
		"nerve.outcome": "error", "error.type": "adapter"})
	if !reviewer.StatusError || !runR.StatusError {
		t.Errorf("the failed turn and its run are errors: %+v %+v", reviewer, runR)
	}
	if len(spans) != 5 {
		t.Errorf("want 5 spans, got %d: %+v", len(spans), spans)
	}
}

// A remote thread's turn, run by a real daemon on a real Khala: the
// daemon's turn span and Khala's handler spans for its requests are one
// trace, joined by the traceparent the daemon sends.
func TestE2EOTelRemoteThread(t *testing.T) {
	rc := startOTLPReceiver(t)
	otelEnv(t, rc)
	k := startKhala(t)
	// A turn of a second on a lease of one: the daemon heartbeats it.
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", "sleep 1\necho \"done by $NERVE_ROLE\"\n", "", 1)
	wf := a.write("remote-traced.yaml", `workflow: remote-traced
binding: cloud
moderator: 'last = null ? {"role": "w"} : {"done": true}'
roles:
  w: {prompt: go}
limits: {claim: 1s}
`)
	a.must(0, "workflow", "push", wf, "origin")
	a.must(0, "daemon", "start")
	r := a.must(0, "workflow", "run", "origin/remote-traced", "--json")
	if out := decodeRun(t, r); out.Thread != "origin/remote-traced#thread-1" || out.Status != "completed" {
		t.Fatalf("run: %s", r)
	}
	a.must(0, "daemon", "stop", "--timeout", "20s")
	k.cmd.Process.Signal(syscall.SIGTERM) // khala serve flushes at shutdown
	const respond = "khala /v1/turns/{turn}/response"
	spans := waitSpans(t, rc, "the daemon's and Khala's spans", func(s []gotSpan) bool {
		return len(findSpans(s, "nerve-daemon", "turn w")) > 0 && len(findSpans(s, "nerve-khala", respond)) > 0
	})

	traceID, _ := threadTrace(telemetry.ThreadKey(k.url, "thread-1"))
	turn := one(t, spans, "nerve-daemon", "turn w")
	run := one(t, spans, "nerve-daemon", "adapter fake")
	resp := one(t, spans, "nerve-khala", respond)
	if turn.Trace != traceID || turn.Parent != "" {
		t.Errorf("remote turn span: trace %s parent %q, want a root in the thread's trace %s", turn.Trace, turn.Parent, traceID)
	}
	wantAttrs(t, turn, map[string]any{"nerve.role": "w", "nerve.agent": "agent-a", "nerve.adapter": "fake",
		"nerve.remote": "origin", "nerve.thread": "thread-1", "nerve.workflow": "remote-traced",
		"nerve.turn": "thread-1.1", "nerve.outcome": "answered"})
	if turn.Attrs["gen_ai.response.model"] != nil || turn.Attrs["gen_ai.usage.input_tokens"] != nil {
		t.Errorf("an exec adapter reports no usage; the span must not claim zeros: %v", turn.Attrs)
	}
	if run.Trace != traceID || run.Parent != turn.ID {
		t.Errorf("adapter span %+v is not under the turn's %s", run, turn.ID)
	}
	if resp.Trace != traceID || resp.Parent != turn.ID {
		t.Errorf("Khala's response handler span (trace %s, parent %s) is not under the daemon's turn span (%s, %s)",
			resp.Trace, resp.Parent, turn.Trace, turn.ID)
	}
	beats := findSpans(spans, "nerve-khala", "khala /v1/turns/{turn}/heartbeat")
	if len(beats) == 0 {
		t.Errorf("no heartbeat spans: %+v", spans)
	}
	for _, hb := range beats {
		if hb.Trace != traceID || hb.Parent != turn.ID {
			t.Errorf("heartbeat span %+v is not under the turn's %s", hb, turn.ID)
		}
	}
	wantAttrs(t, resp, map[string]any{"http.request.method": "POST", "http.route": "/v1/turns/{turn}/response",
		"http.response.status_code": int64(200)})
	// Requests outside a turn (the claim, the thread's start by the CLI)
	// are Khala spans of their own traces.
	claims := findSpans(spans, "nerve-khala", "khala /v1/turns/claim")
	if len(claims) == 0 {
		t.Errorf("no claim spans: %+v", spans)
	}
	for _, c := range claims {
		if c.Trace == traceID {
			t.Errorf("a claim, made before its turn was known, is in the thread's trace: %+v", c)
		}
	}
	if !strings.HasPrefix(resp.Attrs["url.path"].(string), "/v1/turns/thread-1.") {
		t.Errorf("url.path: %v", resp.Attrs["url.path"])
	}
}

// A bad endpoint is a configuration error said in one line, before the
// daemon or Khala starts.
func TestE2EOTelBadEndpoint(t *testing.T) {
	e := newEnv(t)
	for _, bad := range []string{"localhost:4318", "ftp://collector", "http://"} {
		e.extra = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + bad}
		for _, args := range [][]string{{"daemon"}, {"khala", "serve", "--addr", "127.0.0.1:0"}} {
			r := e.run(args...)
			if r.code != 2 || !strings.Contains(r.stderr, "OTEL_EXPORTER_OTLP_ENDPOINT=") ||
				strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 || strings.Contains(r.stderr, "goroutine") {
				t.Errorf("nerve %v with endpoint %q: %s", args, bad, r)
			}
		}
	}
	// In the background, the daemon's error and its hint reach the user
	// as the CLI's own, with its exit code: from `daemon start` and from
	// a command that starts the daemon itself.
	e.extra = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318"}
	wf := e.write("plain.yaml", plainWorkflow)
	for _, args := range [][]string{{"daemon", "start"}, {"workflow", "run", "--detach", wf}} {
		r := e.run(args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 2 ||
			lines[0] != `nerve: the nerve daemon could not start: OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318": want an http:// or https:// URL of an OTLP/HTTP collector, e.g. http://127.0.0.1:4318` ||
			!strings.HasPrefix(lines[1], "hint: fix OTEL_EXPORTER_OTLP_ENDPOINT") {
			t.Errorf("nerve %v: %s", args, r)
		}
	}
	e.extra = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS=api-key=s3cret,broken"}
	if r := e.run("khala", "serve", "--addr", "127.0.0.1:0"); r.code != 2 || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("bad headers: %s", r)
	}
	e.extra = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}
	if r := e.run("khala", "serve", "--addr", "127.0.0.1:0"); r.code != 2 || !strings.Contains(r.stderr, "OTLP over HTTP only") {
		t.Errorf("grpc protocol: %s", r)
	}
}
