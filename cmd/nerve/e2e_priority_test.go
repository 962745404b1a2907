package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `workflow run REMOTE/NAME --priority N` starts a thread whose turns are
// claimed ahead of older, lower ones; --json shows the priority; a bad or
// local --priority is a usage error.
func TestE2ERemoteRunPriority(t *testing.T) {
	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", "echo done\n", "", 1)
	a.write("one.yaml", "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nroles:\n  w: {adapter: x, prompt: p}\n")
	a.must(0, "workflow", "push", filepath.Join(a.home, "one.yaml"), "origin")
	low := a.must(0, "workflow", "run", "origin/one", "--detach", "--json")
	high := a.must(0, "workflow", "run", "origin/one", "--priority", "9", "--detach", "--json")
	var lowOut, highOut map[string]any
	if json.Unmarshal([]byte(low.stdout), &lowOut) != nil || json.Unmarshal([]byte(high.stdout), &highOut) != nil {
		t.Fatalf("run --json: %s / %s", low, high)
	}
	if lowOut["priority"] != float64(0) || highOut["priority"] != float64(9) {
		t.Fatalf("run --json priorities: %v, %v; want 0 and 9", lowOut["priority"], highOut["priority"])
	}
	tok, err := os.ReadFile(filepath.Join(a.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	agent := khNewClient(k.url, strings.TrimSpace(string(tok)))
	got := khClaim(t, agent, 2, "0s")
	want := []string{highOut["thread"].(string), lowOut["thread"].(string)}
	if len(got) != 2 || !strings.HasSuffix(want[0], "#"+got[0].Thread) || !strings.HasSuffix(want[1], "#"+got[1].Thread) {
		t.Fatalf("claimed %+v, want %v in that order", got, want)
	}

	for _, bad := range []struct {
		args []string
		say  string
	}{
		{[]string{"origin/one", "--priority", "101"}, "priority 101"},
		{[]string{"origin/one", "--priority", "-101"}, "priority -101"},
		{[]string{"origin/one", "--priority", "high"}, "priority"},
		{[]string{filepath.Join(a.home, "one.yaml"), "--priority", "3"}, "local thread"},
	} {
		r := a.run(append([]string{"workflow", "run"}, bad.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad.say) || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("workflow run %v: exit %d, stderr %q; want 2 naming %q", bad.args, r.code, r.stderr, bad.say)
		}
	}
}
