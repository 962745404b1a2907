package main

import (
	"fmt"
	"strings"
	"testing"
)

// A command run right after an edit of nerve.yaml acts on the edit: the
// daemon reloads the file before it answers, rather than when its
// watcher's debounce gets to it (a workflow naming the new adapter failed
// with "unknown adapter" meanwhile).
func TestE2ECommandRightAfterConfigEditSeesIt(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {max_concurrent_turns: 2}\n")
	e.must(0, "daemon", "start")
	var adapters strings.Builder
	for i := range 5 {
		name := fmt.Sprintf("added-%d", i)
		fmt.Fprintf(&adapters, "  %s: {type: exec, command: [nerve, example-agent]}\n", name)
		def := e.write(name+".yaml", fmt.Sprintf(`workflow: %s
moderator: '$count(messages) < 1 ? {"role": "worker", "instruction": "go"} : {"done": true, "result": "ok"}'
roles:
  worker: {adapter: %s, prompt: work}
`, name, name))
		e.write("nerve.yaml", "adapters:\n"+adapters.String())
		r := e.must(0, "workflow", "run", def, "--json")
		if out := decodeRun(t, r); out.Status != "completed" {
			t.Fatalf("run %d: %+v\n%s", i, out, r)
		}
	}
}

// max_concurrent_turns: 1.5 is a config error, as `nerve validate` says
// (exit 2), and the daemon keeps its config rather than reload it cut to
// one turn at a time.
func TestE2EFractionalMaxConcurrentTurnsRefused(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {max_concurrent_turns: 3}\n")
	e.must(0, "daemon", "start")
	e.write("nerve.yaml", "agent: {max_concurrent_turns: 1.5}\n")
	r := e.must(2, "validate")
	if want := "nerve.yaml:1: agent.max_concurrent_turns: want a whole number, got 1.5"; !strings.Contains(r.stdout+r.stderr, want) {
		t.Fatalf("validate: want %q in\n%s", want, r)
	}
	r = e.must(0, "daemon", "status")
	if !strings.Contains(r.stdout, "capacity 3") || !strings.Contains(r.stdout, "LAST RELOAD FAILED") || !strings.Contains(r.stdout, "got 1.5") {
		t.Fatalf("the daemon took max_concurrent_turns: 1.5:\n%s", r)
	}
}
