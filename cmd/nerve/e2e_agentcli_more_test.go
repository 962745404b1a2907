package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/fakemodel"
)

// Per-CLI turn timeouts where the defaults of the agent CLI tests are too
// short (../shared/CLIS-MORE.md has the figures): kilo takes up to a
// minute and a half to start on a loaded 2-core machine, copilot retries a
// 500 five times (~16 s), continue a 429 eleven times (~2 min), droid a
// 429 four times (~85 s), qwen and opencode a 429 for 40-60 s; qwen and
// opencode take over 20 s to start under load.
var cliTimeouts = map[string]map[string]string{
	"copilot":  {"500": "90s", "429": "60s", "hang": "30s"},
	"pi":       {"500": "30s", "429": "30s", "hang": "20s"},
	"kilo":     {"": "300s", "500": "240s", "429": "240s", "hang": "150s"},
	"droid":    {"500": "20s", "429": "180s", "hang": "30s"},
	"continue": {"500": "60s", "429": "240s", "hang": "30s"},
	"opencode": {"500": "60s", "429": "120s", "hang": "60s"},
	"qwen":     {"500": "60s", "429": "90s", "hang": "40s"},
}

// turnTimeout is cli's turn timeout in scenario mode ("" for a turn that
// answers), or def.
func turnTimeout(cli, mode string, def ...string) string {
	if d, ok := cliTimeouts[cli][mode]; ok {
		return d
	}
	if len(def) > 0 {
		return def[0]
	}
	// Long enough for every CLI to reach the endpoint on a loaded 2-core
	// machine (qwen and gemini took over 8 s beside a kilo run).
	return "20s"
}

// retriesPastTimeout: droid retries a 500 for ~250 s, qwen ~85 s and
// opencode ~70 s, and no setting shortens it
// (adapter/testdata/FLAGS.md), so those turns end by nerve's timeout.
var retriesPastTimeout = map[string]bool{"droid/500": true, "qwen/500": true, "opencode/500": true}

// runLong runs nerve with room for the slowest CLI's turn.
func (e *env) runLong(args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	return e.runCtx(ctx, args...)
}

// toolOutputRE matches the shell command's output in an answer.
var toolOutputRE = regexp.MustCompile(`(?m)(^|: )hello-from-tool$`)

// toolResultRE matches thread_messages' JSON as a CLI passes it back to the
// model, escaped once or twice: the word may reach the model only there.
var toolResultRE = regexp.MustCompile(`\\+"(thread|step)\\+": ?`)

func endpointFailure(t *testing.T, cli, mode string) {
	m := fakemodel.Start(t, mode)
	timeout := turnTimeout(cli, mode)
	e := agentEnvFor(t, cli, m, timeout, "")
	start := time.Now()
	r := e.runLong("workflow", "run", filepath.Join(e.home, "workflows/quote.yaml"), "--json")
	out := decodeRun(t, r)
	want := "adapter " + cli + ": "
	timedOut := mode == "hang" || retriesPastTimeout[cli+"/"+mode]
	if timedOut {
		d, _ := time.ParseDuration(timeout)
		want += "timed out after " + d.String()
	}
	if r.code != 1 || out.Status != "failed" || !strings.Contains(out.Error, want) ||
		(!timedOut && strings.Contains(out.Error, "timed out")) {
		t.Fatalf("want the thread failed with %q:\n%s\nmodel requests: %d", want, r, len(m.Bodies()))
	}
	if len(m.Bodies()) == 0 {
		t.Fatalf("the CLI never reached the endpoint: %s", out.Error)
	}
	if mode == "429" && !timedOut {
		if n := turnsOf(t, e, cli)["rate_limited"]; n != 1 {
			t.Errorf("the daemon counted %d rate-limited turns of %s, want 1: %s", n, cli, out.Error)
		}
	}
	t.Logf("%s in %s after %d requests: %s", mode, time.Since(start).Round(time.Millisecond), len(m.Bodies()), out.Error)
	noProcessLeft(t, e)
}

// turnsOf is the daemon's count of an adapter's turns by outcome.
func turnsOf(t *testing.T, e *env, name string) map[string]int64 {
	t.Helper()
	var st struct {
		Adapters []adapterJSON `json:"adapters"`
	}
	js := e.must(0, "daemon", "status", "--json")
	if err := json.Unmarshal([]byte(js.stdout), &st); err != nil {
		t.Fatalf("daemon status --json: %v\n%s", err, js)
	}
	for _, a := range st.Adapters {
		if a.Name == name {
			return a.Turns
		}
	}
	t.Fatalf("daemon status lists no adapter %s:\n%s", name, js.stdout)
	return nil
}

const answerWorkflow = `workflow: answer
description: one agent answers
moderator: 'last = null ? {"role": "agent"} : last.error ? {"fail": last.error.message} : {"done": true, "result": RESULT}'
roles:
  agent: {adapter: AGENT, prompt: Answer the question.META}
`

// TestE2EAgentCLIsAnswers: each CLI's answer reaches the thread as its
// content: a plain answer, a fenced json block read into the message's
// meta, and (under full, the one posture every CLI runs any command in) a
// shell command's output, through the CLI's own shell tool.
func TestE2EAgentCLIsAnswers(t *testing.T) {
	for _, cli := range fakemodel.CLIs {
		for _, mode := range []string{"plain", "json", "shell"} {
			t.Run(cli+"/"+mode, func(t *testing.T) {
				requireCLI(t, cli)
				if cli == "codex" && mode == "shell" {
					t.Skip("fakemodel does not speak codex's shell tool")
				}
				answer(t, cli, mode)
			})
		}
	}
}

func answer(t *testing.T, cli, mode string) {
	m := fakemodel.Start(t, mode)
	perm := ""
	if mode == "shell" {
		perm = "full"
	}
	e := agentEnvFor(t, cli, m, turnTimeout(cli, "", "120s"), perm)
	result, meta := "last.content", ""
	if mode == "json" {
		result, meta = "last.meta.verdict", ", meta: {type: object, required: [verdict], properties: {verdict: {type: string}}}"
	}
	wf := strings.NewReplacer("AGENT", cli, "RESULT", result, "META", meta).Replace(answerWorkflow)
	e.write("workflows/answer.yaml", wf)
	r := e.runLong("workflow", "run", filepath.Join(e.home, "workflows/answer.yaml"), "--json")
	out := decodeRun(t, r)
	got := fmt.Sprint(out.Result)
	ok := out.Status == "completed"
	switch mode {
	case "plain":
		ok = ok && got == fakemodel.Plain
	case "json":
		ok = ok && got == "approve"
	case "shell":
		// The output on a line of its own or after a label (the CLIs
		// wrap it in notes: the command, an exit code), not only the
		// command line echoed back.
		ok = ok && strings.HasPrefix(got, "Tool said: ") && toolOutputRE.MatchString(got)
	}
	if !ok {
		t.Fatalf("%s: unexpected result %q:\n%s\nmodel requests:\n%s", mode, got, r, tail(m.Bodies(), 2))
	}
	noProcessLeft(t, e)
}
