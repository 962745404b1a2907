package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClaude is a claude CLI that answers every turn with a result event
// costing $0.60 and 1,200 tokens, as Claude Code reports them.
const fakeClaude = `#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"s1","model":"fake-opus"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"done '"$NERVE_STEP"'","session_id":"s1","total_cost_usd":0.6,"usage":{"input_tokens":1000,"output_tokens":200}}'
`

type adapterJSON struct {
	Name        string           `json:"name"`
	Day         string           `json:"day"`
	SpentUSD    float64          `json:"spent_usd"`
	SpentTokens int64            `json:"spent_tokens"`
	DailyUSD    *float64         `json:"daily_usd"`
	DailyTokens *int64           `json:"daily_tokens"`
	State       string           `json:"state"`
	Reason      *string          `json:"reason"`
	PausedUntil *string          `json:"paused_until"`
	Turns       map[string]int64 `json:"turns"`
}

// A daily cap crossed: the answer that crosses it is kept, the next local
// turn with the adapter fails with kind budget (the moderator decides),
// `daemon status` and /metrics show spent/cap, and a restarted daemon
// still knows what was spent today.
func TestE2EDailyCap(t *testing.T) {
	if now := time.Now().UTC(); now.Hour() == 23 && now.Minute() >= 58 {
		t.Skip("the UTC day would end during the test, and its spend with it")
	}
	e := newEnv(t)
	metricsAddr := freeAddr(t)
	bin := e.write("fake-claude", fakeClaude)
	e.write("nerve.yaml", fmt.Sprintf(`adapters:
  pricey:
    type: claude
    binary: %s
    daily_usd: 1
    daily_tokens: 1000000
daemon:
  metrics_addr: %s
`, bin, metricsAddr))
	def := e.write("spend.yaml", `workflow: spend
moderator: '$count(messages) < 3 ? {"role": "worker", "instruction": "go"} : {"done": true, "result": messages.(error ? error.kind : content)}'
roles:
  worker: {adapter: pricey, prompt: work}
`)
	r := decodeRun(t, e.must(0, "workflow", "run", def, "--json"))
	got, _ := json.Marshal(r.Result)
	if string(got) != `["done 1","done 2","budget"]` {
		t.Fatalf("turns ended %s, want two answers then a budget refusal", got)
	}
	msgs := e.must(0, "thread", "messages", "spend#thread-1", "--step", "3", "--json")
	if !strings.Contains(msgs.stdout, `"kind":"budget"`) || !strings.Contains(msgs.stdout, "$1.20 spent of $1.00") {
		t.Fatalf("the refused turn's message: %s", msgs)
	}

	checkStatus := func(when string) {
		t.Helper()
		var st struct {
			Adapters []adapterJSON `json:"adapters"`
		}
		js := e.must(0, "daemon", "status", "--json")
		if err := json.Unmarshal([]byte(js.stdout), &st); err != nil || len(st.Adapters) != 1 {
			t.Fatalf("%s: daemon status --json: %v\n%s", when, err, js)
		}
		a := st.Adapters[0]
		var raw struct {
			Adapters []json.RawMessage `json:"adapters"`
		}
		json.Unmarshal([]byte(js.stdout), &raw)
		wantKeys(t, "daemon status --json adapters", string(raw.Adapters[0]), "name", "day", "spent_usd", "spent_tokens", "daily_usd",
			"daily_tokens", "state", "reason", "paused_until", "rate_limited_in_a_row", "waiting_turns", "turns")
		if a.Name != "pricey" || a.SpentUSD < 1.19 || a.SpentUSD > 1.21 || a.SpentTokens != 2400 || a.DailyUSD == nil || *a.DailyUSD != 1 ||
			a.State != "capped" || a.Reason == nil || a.PausedUntil != nil {
			t.Fatalf("%s: adapter %+v, want pricey capped at $1.20 of $1.00", when, a)
		}
		text := e.must(0, "daemon", "status")
		if !strings.Contains(text.stdout, "pricey         $1.20 of $1.00, 2400 of 1000000 tokens  CAPPED until 00:00 UTC") {
			t.Fatalf("%s: daemon status:\n%s", when, text.stdout)
		}
	}
	checkStatus("after the run")

	body := scrapeMetrics(t, metricsAddr)
	for _, want := range []string{`nerve_adapter_spent_usd{adapter="pricey"} 1.2`, `nerve_adapter_daily_usd_cap{adapter="pricey"} 1`,
		`nerve_adapter_capped{adapter="pricey"} 1`, `nerve_adapter_paused{adapter="pricey"} 0`,
		`nerve_turns_total{adapter="pricey",outcome="ok"} 2`, `nerve_turns_total{adapter="pricey",outcome="budget"} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}

	e.must(0, "daemon", "stop")
	e.must(0, "daemon", "start")
	checkStatus("after a restart")
	r = decodeRun(t, e.must(0, "workflow", "run", def, "--json"))
	if got, _ := json.Marshal(r.Result); string(got) != `["budget","budget","budget"]` {
		t.Fatalf("after a restart turns ended %s, want every one refused", got)
	}
}

// Bad caps and a metrics address other machines could reach are refused
// by `nerve validate` (exit 2) and by the daemon.
func TestE2EBadCapsRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"adapters:\n  claude:\n    daily_usd: -5\n", "nerve.yaml:3: adapters.claude.daily_usd: must be a number of dollars, 0 or more, got -5"},
		{"adapters:\n  claude:\n    daily_tokens: lots\n", "nerve.yaml:3: adapters.claude.daily_tokens"},
		{"daemon:\n  metrics_addr: 0.0.0.0:9464\n", `nerve.yaml:2: daemon.metrics_addr: "0.0.0.0:9464" is not a loopback address`},
	} {
		e := newEnv(t)
		e.write("nerve.yaml", tc.yaml)
		r := e.must(2, "validate")
		if !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Fatalf("validate of %q:\n%s\nwant %q", tc.yaml, r, tc.want)
		}
		d := e.must(2, "daemon", "start")
		if !strings.Contains(d.stderr, tc.want) || strings.Count(strings.TrimSpace(d.stderr), "\n") > 1 {
			t.Fatalf("daemon start with %q:\n%s", tc.yaml, d)
		}
	}
}

// The khala sense claims no turn for an adapter past its daily cap: a
// cloud turn stays queued on the remote while daemon status says why,
// until nerve.yaml raises the cap (a hot reload); then it is claimed and
// answered.
func TestE2ERemoteCapHoldsClaims(t *testing.T) {
	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "capped-agent", "echo answered\n", "", 1)
	cfg, err := os.ReadFile(filepath.Join(a.home, "nerve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	uncapped := "fake: {type: exec, command: [" + a.home + "/agent.sh], timeout: 60s}"
	if !strings.Contains(string(cfg), uncapped) {
		t.Fatalf("nerve.yaml after init:\n%s", cfg)
	}
	capped := strings.Replace(string(cfg), uncapped, "fake: {type: exec, command: ["+a.home+"/agent.sh], timeout: 60s, daily_tokens: 0}", 1)
	a.write("nerve.yaml", capped)
	a.write("one.yaml", "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true, \"result\": last.content}'\nroles:\n  w: {adapter: x, prompt: p}\n")
	a.must(0, "workflow", "push", filepath.Join(a.home, "one.yaml"), "origin")
	a.must(0, "daemon", "start")
	ref := strings.TrimSpace(a.must(0, "workflow", "run", "origin/one", "--detach").stdout)
	waitFor(t, "the sense to hold its claims", func() bool {
		return strings.Contains(a.must(0, "daemon", "status").stdout,
			"queue (khala, holding claims: budget: adapter fake reached its daily cap (0 tokens spent of 0 today, UTC)")
	})
	logs := a.must(0, "workflow", "logs", ref, "--json")
	if strings.TrimSpace(logs.stdout) != "" {
		t.Fatalf("a turn was answered while the cap held: %s", logs)
	}
	if st := a.must(0, "workflow", "logs", "origin/one", "--json"); !strings.Contains(st.stdout, `"status":"running"`) {
		t.Fatalf("threads: %s", st)
	}

	a.write("nerve.yaml", string(cfg)) // the cap lifted
	res := a.must(0, "workflow", "logs", ref, "-f", "--json")
	if !strings.Contains(res.stdout, `"content":"answered"`) {
		t.Fatalf("after the cap was lifted: %s", res)
	}
	waitFor(t, "the sense to claim again", func() bool {
		return strings.Contains(a.must(0, "daemon", "status").stdout, "queue (khala, polling)")
	})
}
