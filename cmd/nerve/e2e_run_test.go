package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestE2ECodeReviewExample(t *testing.T) {
	e := newEnv(t)
	r := e.must(0, "workflow", "run", repoFile(t, "examples/code-review.yaml"), "--input", "change=Add retries", "--json")
	out := decodeRun(t, r)
	res, _ := out.Result.(map[string]any)
	if out.Status != "completed" || res["approved"] != true || res["rounds"] != float64(2) || !strings.HasPrefix(out.Thread, "code-review#thread-") {
		t.Fatalf("unexpected outcome: %s", r)
	}
	if !strings.Contains(r.stderr, "started the daemon in the background") {
		t.Fatalf("autostart must be announced in one line: %q", r.stderr)
	}
	// Plain (non-TTY) progress lines and the result on stdout.
	r = e.must(0, "workflow", "run", repoFile(t, "examples/code-review.yaml"), "--input", "change=Again")
	for _, want := range []string{"step 1  author  answered", "step 4  reviewer  answered", "completed after 4 steps"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("progress lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, `"approved": true`) {
		t.Fatalf("result not on stdout: %s", r)
	}
	// The agents read the thread through `nerve thread messages`: the
	// reviewer's second answer depends on seeing its first.
	msgs := e.must(0, "thread", "messages", "code-review#thread-2", "--role", "reviewer", "--json")
	lines := strings.Split(strings.TrimSpace(msgs.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 reviewer messages, got %s", msgs)
	}
	var m struct {
		Step  int            `json:"step"`
		Meta  map[string]any `json:"meta"`
		Usage map[string]any `json:"usage"`
		Agent string         `json:"agent"`
	}
	json.Unmarshal([]byte(lines[1]), &m)
	if m.Step != 4 || m.Meta["approved"] != true || m.Usage == nil || m.Agent == "" {
		t.Fatalf("message shape: %s", lines[1])
	}
	last := e.must(0, "thread", "messages", "code-review#thread-2", "--last", "1", "--json")
	if strings.Count(last.stdout, "\n") != 1 || !strings.Contains(last.stdout, `"step":4`) {
		t.Fatalf("--last 1: %s", last)
	}
	step := e.must(0, "thread", "messages", "code-review#thread-2", "--step", "1")
	if !strings.Contains(step.stdout, "step 1 · author") || strings.Contains(step.stdout, "step 2") {
		t.Fatalf("--step 1: %s", step)
	}
}

func TestE2EParallelExample(t *testing.T) {
	e := newEnv(t)
	r := e.must(0, "workflow", "run", repoFile(t, "examples/review-panel.yaml"), "--input", "change=x", "--json")
	out := decodeRun(t, r)
	res, _ := out.Result.(map[string]any)
	if out.Status != "completed" || res["verdict"] != "ship" || res["reviews"] != float64(3) {
		t.Fatalf("unexpected outcome: %s", r)
	}
}

func TestE2EDetachLogsListValidate(t *testing.T) {
	e := newEnv(t)
	src, _ := os.ReadFile(repoFile(t, "examples/code-review.yaml"))
	e.write("workflows/code-review.yaml", string(src))
	mod, _ := os.ReadFile(repoFile(t, "examples/code-review.jsonata"))
	e.write("workflows/code-review.jsonata", string(mod))

	list := e.must(0, "workflow", "list", "--json")
	var entries []map[string]string
	if err := json.Unmarshal([]byte(list.stdout), &entries); err != nil || len(entries) != 1 || entries[0]["ref"] != "code-review" || entries[0]["binding"] != "local" {
		t.Fatalf("workflow list --json: %s", list)
	}
	e.must(0, "validate")

	r := e.must(0, "workflow", "run", "code-review", "--input", "change=x", "--detach")
	ref := strings.TrimSpace(r.stdout)
	if ref != "code-review#thread-1" {
		t.Fatalf("--detach printed %q", ref)
	}
	logs := e.must(0, "workflow", "logs", ref, "-f")
	if !strings.Contains(logs.stdout, "thread-1 completed") || !strings.Contains(logs.stdout, "Approved.") {
		t.Fatalf("logs -f: %s", logs)
	}
	js := e.must(0, "workflow", "logs", ref, "--json")
	if n := strings.Count(js.stdout, "\n"); n != 4 {
		t.Fatalf("logs --json: want 4 message lines, got %d:\n%s", n, js.stdout)
	}
	threads := e.must(0, "workflow", "logs", "code-review")
	if !strings.Contains(threads.stdout, "code-review#thread-1  completed") {
		t.Fatalf("thread list: %s", threads)
	}
	status := e.must(0, "daemon", "status", "--json")
	var st map[string]any
	if json.Unmarshal([]byte(status.stdout), &st); st["running"] != true || st["pid"] == nil {
		t.Fatalf("daemon status --json: %s", status)
	}
	e.must(0, "daemon", "stop")
	e.must(1, "daemon", "status")
}

func TestE2EVersionAndCompletion(t *testing.T) {
	e := newEnv(t)
	if r := e.must(0, "version"); !strings.HasPrefix(r.stdout, "nerve ") {
		t.Fatalf("version: %s", r)
	}
	if r := e.must(0, "completion", "bash"); !strings.Contains(r.stdout, "__start_nerve") {
		t.Fatal("no bash completion")
	}
	if _, err := os.Stat(e.home + "/nerve.sock"); err == nil {
		t.Fatal("version must not start a daemon")
	}
}
