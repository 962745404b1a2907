package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/fakemodel"
)

// spendWorkflow would give gemini turns forever: only its token budget
// ends it.
const spendWorkflow = `workflow: spend
binding: BINDING
moderator: '{"role": "agent", "instruction": "Quote the last message."}'
limits: {max_steps: 20, max_tokens: 500}
roles:
  agent: {adapter: gemini, prompt: Read the thread with your nerve tools.}
`

var budgetTokens = regexp.MustCompile(`^budget: ([0-9,]+) tokens of 500$`)

// geminiYAML is a nerve.yaml adapter entry running gemini against m;
// binary, when set, is the command run in gemini's place.
func geminiYAML(t *testing.T, e *env, m *fakemodel.Server, binary string) string {
	t.Helper()
	model, cliEnv, err := fakemodel.Setup("gemini", mkdir(t, e.home, "cli"), m.URL)
	if err != nil {
		t.Fatal(err)
	}
	ad := map[string]any{"env": cliEnv, "timeout": "120s", "model": model}
	if binary != "" {
		ad["binary"] = binary
	}
	raw, _ := json.Marshal(ad)
	return "  gemini: " + string(raw) + "\n"
}

// runUsage is the totals `workflow run --json` prints.
type runUsage struct {
	Messages     int64 `json:"messages"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type usageReport struct {
	By     string `json:"by"`
	Groups []struct {
		Key      string `json:"key"`
		Messages int64  `json:"messages"`
	} `json:"groups"`
	Total struct {
		Messages     int64    `json:"messages"`
		InputTokens  int64    `json:"input_tokens"`
		OutputTokens int64    `json:"output_tokens"`
		CostUSD      *float64 `json:"cost_usd"`
	} `json:"total"`
}

func usageOf(t *testing.T, e *env, args ...string) usageReport {
	t.Helper()
	var r usageReport
	out := e.must(0, append(append([]string{"usage"}, args...), "--json")...).stdout
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("nerve usage %v: %v\n%s", args, err, out)
	}
	return r
}

// checkBudgetRun: the thread failed on its budget after the answer that
// crossed it, and its totals, `workflow logs` and `nerve usage` agree.
func checkBudgetRun(t *testing.T, e *env, r result, usageArgs ...string) string {
	t.Helper()
	out := decodeRun(t, r)
	m := budgetTokens.FindStringSubmatch(out.Error)
	if r.code != 1 || out.Status != "failed" || m == nil {
		t.Fatalf("want the thread failed on its budget:\n%s", r)
	}
	spent, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	var run struct {
		Usage runUsage `json:"usage"`
	}
	json.Unmarshal([]byte(r.stdout), &run)
	if run.Usage.InputTokens+run.Usage.OutputTokens != spent || run.Usage.Messages < 2 {
		t.Fatalf("run --json usage %+v, budget says %d", run.Usage, spent)
	}
	// Each turn spends the same: the last one crossed, the one before not.
	per := spent / run.Usage.Messages
	if spent <= 500 || spent-per > 500 {
		t.Fatalf("%d turns spent %d: the thread went on past its budget", run.Usage.Messages, spent)
	}
	msgs := strings.Count(e.must(0, "workflow", "logs", out.Thread, "--json").stdout, "\n")
	if int64(msgs) != run.Usage.Messages {
		t.Fatalf("%d messages recorded, usage counts %d", msgs, run.Usage.Messages)
	}
	if logs := e.must(0, "workflow", "logs", out.Thread).stdout; !strings.Contains(logs, fmt.Sprintf("usage: %s tokens, $", m[1])) {
		t.Fatalf("workflow logs has no usage line:\n%s", logs)
	}
	for _, by := range []string{"workflow", "role", "agent", "adapter", "model", "day"} {
		rep := usageOf(t, e, append([]string{"--by", by}, usageArgs...)...)
		if rep.By != by || len(rep.Groups) != 1 || rep.Total.Messages != run.Usage.Messages ||
			rep.Total.InputTokens+rep.Total.OutputTokens != spent || rep.Total.CostUSD == nil {
			t.Fatalf("nerve usage --by %s %v: %+v", by, usageArgs, rep)
		}
	}
	thread := usageOf(t, e, out.Thread, "--by", "role")
	if thread.Total.Messages != run.Usage.Messages {
		t.Fatalf("nerve usage %s: %+v", out.Thread, thread)
	}
	return out.Thread
}

func TestE2EUsageAndBudgetLocal(t *testing.T) {
	requireCLI(t, "gemini")
	m := fakemodel.Start(t, "agent")
	e := newEnv(t)
	e.write("nerve.yaml", "adapters:\n"+geminiYAML(t, e, m, "")+"pricing:\n  gemini-test: {input: 1, output: 2}\n"+
		"sandbox: {network: open}\n") // the fake model endpoint on loopback, until the allow-list's proxy
	e.write("workflows/spend.yaml", strings.Replace(spendWorkflow, "BINDING", "local", 1))
	r := e.run("workflow", "run", "spend", "--json")
	checkBudgetRun(t, e, r)
	human := e.must(0, "usage", "--by", "model")
	if !strings.Contains(human.stdout, "gemini-test") || !strings.Contains(human.stdout, "TOTAL") || !strings.Contains(human.stdout, "$0.00") {
		t.Fatalf("nerve usage --by model:\n%s", human)
	}
	for _, bad := range [][]string{{"--by", "colour"}, {"--since", "yesterday"}, {"--since", "2026-02-30"},
		{"no such ref!"}, {"spend#thread-99"}, {"--remote", "nowhere"}, {"a", "b"}} {
		r := e.run(append([]string{"usage"}, bad...)...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) > 2 || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("nerve usage %v: want exit 2 and a line saying why:\n%s", bad, r)
		}
	}
}

// geminiRemoteEnv is a home whose daemon (not started) serves turns of
// Khala k as agent name with gemini, the nerve.yaml entry adapter, and
// prices gemini-test.
func geminiRemoteEnv(t *testing.T, k *khalaServer, name string, capacity int, adapter func(*env) string) *env {
	t.Helper()
	e := newEnv(t)
	e.write("nerve.yaml", fmt.Sprintf(`agent: {name: %s, max_concurrent_turns: %d}
remotes:
  origin: {url: "%s"}
adapters:
%ssenses:
  - {name: queue, kind: khala, remote: origin}
reflexes:
  - {on: queue, do: turn, adapter: gemini}
pricing:
  gemini-test: {input: 1, output: 2}
daemon: {shutdown_grace: 1s}
sandbox: {network: open} # the fake model endpoint on loopback, until the allow-list's proxy
`, name, capacity, k.url, adapter(e)))
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	return e
}

func TestE2EUsageAndBudgetRemote(t *testing.T) {
	requireCLI(t, "gemini")
	m := fakemodel.Start(t, "agent")
	e := geminiRemoteEnv(t, startKhala(t), "spender", 1, func(e *env) string { return geminiYAML(t, e, m, "") })
	wf := e.write("spend.yaml", strings.Replace(spendWorkflow, "BINDING", "cloud", 1))
	e.must(0, "workflow", "push", wf, "origin")
	e.must(0, "daemon", "start")
	r := e.run("workflow", "run", "origin/spend", "--json")
	ref := checkBudgetRun(t, e, r, "--remote", "origin")
	if !strings.HasPrefix(ref, "origin/spend#") {
		t.Fatalf("ref %s", ref)
	}
	if rep := usageOf(t, e, "origin/spend", "--by", "agent"); len(rep.Groups) != 1 || rep.Groups[0].Key != "spender" {
		t.Fatalf("nerve usage origin/spend --by agent: %+v", rep)
	}
	if rep := usageOf(t, e, "--by", "model"); rep.Total.Messages != 0 {
		t.Fatalf("local usage counts the remote's turns: %+v", rep)
	}
	for _, bad := range [][]string{{"--remote", "origin", "--by", "colour"}, {"other/spend", "--remote", "origin"}} {
		if r := e.run(append([]string{"usage"}, bad...)...); r.code != 2 {
			t.Errorf("nerve usage %v: want exit 2:\n%s", bad, r)
		}
	}
}
