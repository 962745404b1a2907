package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Inside a turn of a remote thread, `nerve mcp` reads the thread from the
// turn's snapshot and its status from the remote, and notify travels
// through the local daemon (which holds the turn's claim) to Khala's
// trace, `workflow logs` and the thread's webhook.
func TestE2EMCPRemoteTurnNotify(t *testing.T) {
	k := startKhala(t)
	script := `case "$NERVE_ROLE" in
author) echo "the first answer" ;;
holder) ` + holdScript + ` ;;
esac
`
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-m", script, "", 1)
	a.unsandboxed("its agent hands its environment to the test through NERVE_HOME, for an MCP session of the turn's")
	a.write("hold.yaml", `workflow: hold
moderator: 'last = null ? {"role": "author"} : last.role = "author" ? {"role": "holder"} : {"done": true, "result": last.content}'
roles:
  author: {adapter: x, prompt: p}
  holder: {adapter: x, prompt: p}
`)
	a.must(0, "workflow", "push", filepath.Join(a.home, "hold.yaml"), "origin")
	a.must(0, "daemon", "start")

	hooks := make(chan map[string]any, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		raw, _ := io.ReadAll(r.Body)
		if json.Unmarshal(raw, &p) == nil {
			hooks <- p
		}
	}))
	defer hook.Close()
	token, err := os.ReadFile(filepath.Join(a.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"input": map[string]any{}, "webhook": hook.URL})
	req, _ := http.NewRequest("POST", k.url+"/v1/workflows/hold/threads", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct{ Thread string }
	json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	ref := "origin/hold#" + started.Thread

	turn := turnEnv(t, a)
	if turn["NERVE_THREAD"] != ref || turn["NERVE_STEP"] != "2" {
		t.Fatalf("the remote turn's environment: %v (thread %s)", turn, ref)
	}
	cs := mcpSession(t, a.home, turn)
	var got mcpMessages
	decode(t, call(t, cs, "thread_messages", nil, false), &got)
	if got.Thread != ref || len(got.Messages) != 1 || strings.TrimSpace(got.Messages[0].Content) != "the first answer" {
		t.Fatalf("thread_messages of the remote turn: %+v", got)
	}
	var st struct {
		Thread, Status string
		Step           int
	}
	decode(t, call(t, cs, "thread_status", nil, false), &st)
	if st.Thread != ref || st.Status != "running" || st.Step != 2 {
		t.Fatalf("thread_status of the remote thread: %+v", st)
	}
	call(t, cs, "notify", map[string]any{"level": "blocking", "message": "I need the staging password"}, false)
	if logs := a.must(0, "workflow", "logs", ref).stdout; !strings.Contains(logs, "step 2  holder  notify blocking: I need the staging password") {
		t.Fatalf("workflow logs lack the notice:\n%s", logs)
	}
	select {
	case p := <-hooks:
		if p["event"] != "notify" || p["level"] != "blocking" || p["message"] != "I need the staging password" || p["thread"] != started.Thread {
			t.Fatalf("webhook payload: %v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the thread's webhook heard no notify within 10s")
	}

	// workflow_run inside the remote turn starts a child of its thread, on
	// the same Khala, shown at the turn's step in the parent's log.
	var child struct{ Thread, Status string }
	decode(t, call(t, cs, "workflow_run", map[string]any{"workflow": "origin/hold"}, false), &child)
	if !strings.HasPrefix(child.Thread, "origin/hold#thread-") {
		t.Fatalf("workflow_run: %+v", child)
	}
	if logs := a.must(0, "workflow", "logs", ref).stdout; !strings.Contains(logs, "children: 1 running ("+strings.TrimPrefix(child.Thread, "origin/")+")") ||
		!strings.Contains(logs, "step 2  started child "+strings.TrimPrefix(child.Thread, "origin/")) {
		t.Fatalf("the parent's log does not show its child:\n%s", logs)
	}

	a.write("release", "")
	a.must(0, "workflow", "logs", ref, "-f")
	if got := text(call(t, cs, "notify", map[string]any{"level": "info", "message": "too late"}, true)); !strings.Contains(got, "the turn's channel to nerve does not answer") || !strings.Contains(got, "its turn has ended") {
		t.Fatalf("notify after the turn: %s", got)
	}
}
