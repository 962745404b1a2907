package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seesUsage ends with the usage its moderator saw.
const seesUsage = `workflow: boss
binding: BINDING
moderator: 'last = null ? {"role": "lead", "instruction": "go"} : {"done": true, "result": usage}'
roles:
  lead: {adapter: claude-lead, prompt: Lead.}
`

const usageChild = `workflow: spender
binding: BINDING
moderator: 'last = null ? {"role": "agent", "instruction": "go"} : {"done": true, "result": "spent"}'
roles:
  agent: {adapter: claude-lead, prompt: Spend.}
`

// claudeLead is a fake claude that prints a real claude's stream (120
// input and 7 output tokens, $0.00062) and, on a lead's turn, first runs
// workflow child from inside the turn, as an agent would.
func claudeLead(t *testing.T, e *env, child string) string {
	script := e.write("bin/claude-lead", fmt.Sprintf(`#!/bin/sh
if [ "$NERVE_ROLE" = lead ]; then
  nerve workflow run %s --json > "$NERVE_HOME/child.json" 2>&1 || exit 1
fi
cat %s/claude-success.jsonl
`, child, repoFile(t, "adapter/testdata")))
	os.Chmod(script, 0o755)
	return script
}

// checkUsageSeen: the moderator's document had the thread's totals so
// far, the child its lead started counted: two answers of 120 and 7
// tokens, the same totals `workflow run --json` prints.
func checkUsageSeen(t *testing.T, e *env, r result) {
	t.Helper()
	var run struct {
		Status string         `json:"status"`
		Result map[string]any `json:"result"`
		Usage  map[string]any `json:"usage"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || run.Status != "completed" {
		child, _ := os.ReadFile(filepath.Join(e.home, "child.json"))
		t.Fatalf("run: %v\n%s\nchild: %s", err, r, child)
	}
	want := map[string]any{"messages": 2.0, "input_tokens": 240.0, "output_tokens": 14.0, "cache_read_tokens": 0.0, "unpriced": 0.0}
	for k, v := range want {
		if run.Result[k] != v {
			t.Errorf("the moderator saw usage %v, want %s: %v", run.Result, k, v)
		}
	}
	if c, _ := run.Result["cost_usd"].(float64); math.Abs(c-0.00124) > 1e-9 {
		t.Errorf("the moderator saw usage %v, want cost_usd 0.00124", run.Result)
	}
	if fmt.Sprint(run.Result) != fmt.Sprint(run.Usage) {
		t.Errorf("the moderator saw %v, the thread's totals are %v", run.Result, run.Usage)
	}
}

func TestE2EModeratorSeesUsageLocal(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("its agent starts a child through nerve.sock and writes it into NERVE_HOME")
	e.write("nerve.yaml", fmt.Sprintf("adapters:\n  claude-lead: {type: claude, binary: %s}\n", claudeLead(t, e, "spender")))
	e.write("workflows/boss.yaml", strings.Replace(seesUsage, "BINDING", "local", 1))
	e.write("workflows/spender.yaml", strings.Replace(usageChild, "BINDING", "local", 1))
	checkUsageSeen(t, e, e.must(0, "workflow", "run", "boss", "--json"))
}

func TestE2EModeratorSeesUsageRemote(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	e.unsandboxed("its agent starts a child through nerve.sock and writes it into NERVE_HOME")
	e.write("nerve.yaml", fmt.Sprintf(`agent: {name: lead, max_concurrent_turns: 2}
remotes:
  origin: {url: "%s"}
adapters:
  claude-lead: {type: claude, binary: %s}
senses:
  - {name: queue, kind: khala, remote: origin}
reflexes:
  - {on: queue, do: turn, adapter: claude-lead}
daemon: {shutdown_grace: 1s}
`, k.url, claudeLead(t, e, "origin/spender")))
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	for name, def := range map[string]string{"boss": seesUsage, "spender": usageChild} {
		def = strings.Replace(strings.Replace(def, "BINDING", "cloud", 1), "adapter: claude-lead, ", "", 1)
		e.must(0, "workflow", "push", e.write(name+".yaml", def), "origin")
	}
	e.must(0, "daemon", "start")
	checkUsageSeen(t, e, e.must(0, "workflow", "run", "origin/boss", "--json"))
}
