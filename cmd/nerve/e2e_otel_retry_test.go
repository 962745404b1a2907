package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/telemetry"
)

// An answer the daemon could not deliver at once (Khala was down) is
// delivered by its outbox when Khala is back, and Khala's span for that
// delivery is still under the daemon's turn span: the outbox keeps the
// turn's traceparent with the answer.
func TestE2EOTelRetriedAnswerKeepsItsTrace(t *testing.T) {
	rc := startOTLPReceiver(t)
	otelEnv(t, rc)
	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a",
		`touch "$NERVE_HOME/started"
while [ ! -e "$NERVE_HOME/go" ]; do sleep 0.05; done
echo "late answer"
`, "", 1)
	a.unsandboxed("its agent signals the test through files in NERVE_HOME")
	wf := a.write("retried.yaml", `workflow: retried
binding: cloud
moderator: 'last = null ? {"role": "w"} : {"done": true, "result": last.content}'
roles:
  w: {prompt: go}
limits: {claim: 1m}
`)
	a.must(0, "workflow", "push", wf, "origin")
	a.must(0, "daemon", "start")
	a.must(0, "workflow", "run", "origin/retried", "--detach")
	waitFor(t, "the turn to start", func() bool {
		_, err := os.Stat(filepath.Join(a.home, "started"))
		return err == nil
	})
	k.stop() // flushes the spans of its first life
	a.write("go", "")
	waitFor(t, "the daemon to keep the answer in its outbox", func() bool {
		log, _ := os.ReadFile(filepath.Join(a.home, "nerve.log"))
		return strings.Contains(string(log), "outbox: remote unavailable; responses kept and retried")
	})
	k.start(t)
	if r := a.must(0, "workflow", "logs", "origin/retried#thread-1", "-f"); !strings.Contains(r.stdout, "thread-1 completed") {
		t.Fatalf("the thread did not complete with the late answer:\n%s", r)
	}
	a.must(0, "daemon", "stop", "--timeout", "20s")
	k.stop()
	const respond = "khala /v1/turns/{turn}/response"
	spans := waitSpans(t, rc, "the turn's span and the delivery's", func(s []gotSpan) bool {
		return len(findSpans(s, "nerve-daemon", "turn w")) > 0 && len(findSpans(s, "nerve-khala", respond)) > 0
	})
	traceID, _ := threadTrace(telemetry.ThreadKey(k.url, "thread-1"))
	turn := one(t, spans, "nerve-daemon", "turn w")
	resp := one(t, spans, "nerve-khala", respond)
	if turn.Trace != traceID || resp.Trace != traceID || resp.Parent != turn.ID {
		t.Errorf("the retried delivery's span (trace %s, parent %s) is not under the turn's span (trace %s, id %s; thread trace %s)",
			resp.Trace, resp.Parent, turn.Trace, turn.ID, traceID)
	}
	if resp.StartNanos < turn.EndNanos {
		t.Errorf("the delivery's span starts before the turn's ends: it was not the retry")
	}
}
