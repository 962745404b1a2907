package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A remote turn is watched as a local one is: an agent that goes silent
// past daemon.stall_after raises a stall, an answer that fails extraction
// raises malformed, and both reach Khala's trace and `workflow logs`.
func TestE2ERemoteDetections(t *testing.T) {
	k := startKhala(t)
	script := `case "$NERVE_ROLE" in
silent) sleep 4; echo woke up ;;
shaper) echo 'this is not json' ;;
esac
`
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-d", script, "", 1)
	a.unsandboxed("its roles' stall thresholds are tight, and a sandboxed turn's start (bwrap, the bridge) adds to the silence they time")
	cfg, err := os.ReadFile(filepath.Join(a.home, "nerve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a.write("nerve.yaml", strings.Replace(string(cfg), "daemon: {shutdown_grace: 1s}", "daemon: {shutdown_grace: 1s, stall_after: 1s}", 1))
	a.write("detect.yaml", `workflow: detect
moderator: 'last = null ? {"role": "silent"} : last.role = "silent" ? {"role": "shaper"} : {"done": true}'
roles:
  silent: {adapter: x, prompt: p}
  shaper:
    adapter: x
    prompt: p
    meta: {type: object, required: [ok], properties: {ok: {type: boolean}}}
`)
	a.must(0, "workflow", "push", filepath.Join(a.home, "detect.yaml"), "origin")
	a.must(0, "daemon", "start")
	ref := strings.TrimSpace(a.must(0, "workflow", "run", "origin/detect", "--detach").stdout)
	// While the silent turn runs, the daemon shows its stall.
	waitFor(t, "daemon status to show the stall", func() bool {
		return strings.Contains(a.must(0, "daemon", "status").stdout, "detection stall: no output for")
	})
	a.must(0, "workflow", "logs", ref, "-f")
	run := runJSON{Thread: ref}

	logs := a.must(0, "workflow", "logs", run.Thread).stdout
	for _, want := range []string{"silent  detection stall: no output for", "shaper  detection malformed: structured output"} {
		if !strings.Contains(logs, want) {
			t.Errorf("workflow logs lack %q:\n%s", want, logs)
		}
	}

	token, err := os.ReadFile(filepath.Join(a.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	id := run.Thread[strings.LastIndexByte(run.Thread, '#')+1:]
	req, _ := http.NewRequest("GET", k.url+"/v1/threads/"+id+"/trace", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var trace []struct {
		Type, Status, Role, Agent, Adapter, Turn, Claim, Message string
		Step                                                     int
	}
	if err := json.NewDecoder(resp.Body).Decode(&trace); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range trace {
		if e.Type != "detection" {
			continue
		}
		got[e.Status]++
		if e.Agent != "agent-d" || e.Adapter != "fake" || e.Turn == "" || e.Claim == "" || e.Message == "" {
			t.Errorf("detection without its turn, agent or adapter: %+v", e)
		}
		if want := map[string]string{"stall": "silent", "malformed": "shaper"}[e.Status]; e.Role != want {
			t.Errorf("%s detection on role %s, want %s", e.Status, e.Role, want)
		}
	}
	if got["stall"] != 1 || got["malformed"] != 1 || len(got) != 2 {
		t.Fatalf("Khala's trace has detections %v, want one stall and one malformed: %+v", got, trace)
	}
}
