package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/fakemodel"
)

// delegateBudget is a lead's turn forever, on a token budget a lead's own
// turn stays within (about 220 tokens from the fake model) while a lead
// and the child it starts (as much again) cross it.
const delegateBudget = `workflow: boss
binding: BINDING
moderator: '{"role": "lead", "instruction": "Quote the last message."}'
limits: {max_steps: 4, max_tokens: 300}
roles:
  lead: {adapter: gemini, prompt: Read the thread with your nerve tools.}
`

const spenderWorkflow = `workflow: spender
binding: BINDING
moderator: 'last = null ? {"role": "agent", "instruction": "Quote the last message."} : {"done": true, "result": "spent"}'
roles:
  agent: {adapter: gemini, prompt: Read the thread with your nerve tools.}
`

// delegatingGemini is a nerve.yaml adapter entry running gemini against m
// through a wrapper that, on a lead's turn, first starts workflow child
// from inside the turn, as an agent would (`nerve workflow run`).
func delegatingGemini(t *testing.T, e *env, m *fakemodel.Server, child string) string {
	t.Helper()
	gemini, err := exec.LookPath("gemini")
	if err != nil {
		t.Fatal(err)
	}
	wrapper := e.write("gemini-lead.sh", fmt.Sprintf(`#!/bin/sh
if [ "$NERVE_ROLE" = lead ]; then
  nerve workflow run %s --json > "$NERVE_HOME/child-$NERVE_STEP.json" 2> "$NERVE_HOME/child-$NERVE_STEP.err"
fi
exec %s "$@"
`, child, gemini))
	os.Chmod(wrapper, 0o755)
	return geminiYAML(t, e, m, wrapper)
}

// checkDelegatedSpend: the parent failed on its budget after its first
// lead turn, which spent within it; what crossed it is the child the lead
// started, whose totals count in the parent's.
func checkDelegatedSpend(t *testing.T, e *env, r result) {
	t.Helper()
	out := decodeRun(t, r)
	var run struct {
		Usage runUsage `json:"usage"`
	}
	json.Unmarshal([]byte(r.stdout), &run)
	total := run.Usage.InputTokens + run.Usage.OutputTokens
	if r.code != 1 || out.Status != "failed" || out.Error != fmt.Sprintf("budget: %d tokens of 300", total) {
		t.Fatalf("want the parent failed on its budget, its child's spend counted:\n%s", r)
	}
	b, _ := os.ReadFile(filepath.Join(e.home, "child-1.json"))
	var child struct {
		runJSON
		Usage runUsage `json:"usage"`
	}
	if err := json.Unmarshal(b, &child); err != nil || child.Status != "completed" || child.Usage.Messages != 1 {
		errs, _ := os.ReadFile(filepath.Join(e.home, "child-1.err"))
		t.Fatalf("the lead's child printed %q %s (%v)", b, errs, err)
	}
	// One lead turn and the child's: the parent did not go on to step 2.
	childTokens := child.Usage.InputTokens + child.Usage.OutputTokens
	if run.Usage.Messages != 2 || childTokens == 0 || childTokens >= total {
		t.Fatalf("parent usage %+v, child's %+v", run.Usage, child.Usage)
	}
	logs := e.must(0, "workflow", "logs", out.Thread).stdout
	if !strings.Contains(logs, "usage: "+strconv.FormatInt(total, 10)+" tokens") || !strings.Contains(logs, "children: 1 completed") ||
		!strings.Contains(logs, "step 1  started child spender#") {
		t.Fatalf("the parent's log:\n%s", logs)
	}
	// `nerve usage` of the parent counts what its child spent too, under
	// the child's workflow: the same total as the thread's.
	var rep struct {
		Groups []struct {
			Key string `json:"key"`
			runUsage
		} `json:"groups"`
		Total runUsage `json:"total"`
	}
	u := e.must(0, "usage", out.Thread, "--by", "workflow", "--json")
	if err := json.Unmarshal([]byte(u.stdout), &rep); err != nil {
		t.Fatalf("usage --json: %v\n%s", err, u)
	}
	byWF := map[string]int64{}
	for _, g := range rep.Groups {
		byWF[g.Key] = g.InputTokens + g.OutputTokens
	}
	if rep.Total.InputTokens+rep.Total.OutputTokens != total || byWF["spender"] != childTokens || byWF["boss"] != total-childTokens {
		t.Fatalf("usage of %s: %s, want %d tokens, %d of them the child's", out.Thread, u.stdout, total, childTokens)
	}
}

func TestE2EAgentStartedChildSpendLocal(t *testing.T) {
	requireCLI(t, "gemini")
	m := fakemodel.Start(t, "agent")
	e := newEnv(t)
	e.unsandboxed("its lead starts a child through nerve.sock and writes it into NERVE_HOME")
	e.write("nerve.yaml", "adapters:\n"+delegatingGemini(t, e, m, "spender")+"pricing:\n  gemini-test: {input: 1, output: 2}\n")
	e.write("workflows/boss.yaml", strings.Replace(delegateBudget, "BINDING", "local", 1))
	e.write("workflows/spender.yaml", strings.Replace(spenderWorkflow, "BINDING", "local", 1))
	checkDelegatedSpend(t, e, e.run("workflow", "run", "boss", "--json"))
}

func TestE2EAgentStartedChildSpendRemote(t *testing.T) {
	requireCLI(t, "gemini")
	m := fakemodel.Start(t, "agent")
	e := geminiRemoteEnv(t, startKhala(t), "lead", 2, func(e *env) string { return delegatingGemini(t, e, m, "origin/spender") })
	e.unsandboxed("its lead starts a child through nerve.sock and writes it into NERVE_HOME")
	e.must(0, "workflow", "push", e.write("boss.yaml", strings.Replace(delegateBudget, "BINDING", "cloud", 1)), "origin")
	e.must(0, "workflow", "push", e.write("spender.yaml", strings.Replace(spenderWorkflow, "BINDING", "cloud", 1)), "origin")
	e.must(0, "daemon", "start")
	checkDelegatedSpend(t, e, e.run("workflow", "run", "origin/boss", "--json"))
}
