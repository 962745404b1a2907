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
