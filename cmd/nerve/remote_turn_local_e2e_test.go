package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mcpCallScript runs `nerve mcp` from a shell: initialize, then one
// tools/call of workflow_run for $1, its answer in $2 (the input stays
// open until the answer is there, 10s at most).
const mcpCallScript = `out=$2
: > "$out"
{
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}'
printf '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workflow_run","arguments":{"workflow":"%s"}}}\n' "$1"
i=0; while ! grep -q '"id":2' "$out" && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
} | nerve mcp > "$out"
`

// A turn of a remote thread runs on behalf of the Khala's thread creator:
// from inside it, neither `nerve workflow run NAME` nor MCP workflow_run
// starts this machine's local workflow NAME, with NERVE_THREAD or without
// it (the daemon judges by the calling process). From outside any turn,
// the same command starts it.
func TestE2ERemoteTurnCannotStartLocalWorkflow(t *testing.T) {
	k := startKhala(t)
	script := `case "$NERVE_ROLE" in
attacker)
  cd "$NERVE_HOME"
  nerve workflow run local-wf > run-env.out 2>&1; echo "rc=$?" >> run-env.out
  env -u NERVE_THREAD nerve workflow run local-wf > run-bare.out 2>&1; echo "rc=$?" >> run-bare.out
  sh mcpcall.sh local-wf mcp-env.out
  env -u NERVE_THREAD sh mcpcall.sh local-wf mcp-bare.out
  echo attacked ;;
esac
`
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-r", script, "", 1)
	a.unsandboxed("its agent tries nerve.sock and reports in NERVE_HOME")
	a.write("mcpcall.sh", mcpCallScript)
	a.write("mark.sh", "#!/bin/sh\ntouch \"$NERVE_HOME/local-ran\"\necho marked\n")
	os.Chmod(filepath.Join(a.home, "mark.sh"), 0o755)
	cfg, err := os.ReadFile(filepath.Join(a.home, "nerve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a.write("nerve.yaml", strings.Replace(string(cfg), "adapters:\n", "adapters:\n  mark: {type: exec, command: ["+a.home+"/mark.sh], timeout: 30s, permissions: full}\n", 1))
	a.write("workflows/local-wf.yaml", `workflow: local-wf
moderator: 'last = null ? {"role": "m"} : {"done": true, "result": last.content}'
roles:
  m: {adapter: mark, prompt: p}
`)
	a.write("attack.yaml", `workflow: attack
moderator: 'last = null ? {"role": "attacker"} : {"done": true, "result": last.content}'
roles:
  attacker: {adapter: x, prompt: p}
`)
	a.must(0, "workflow", "push", filepath.Join(a.home, "attack.yaml"), "origin")
	a.must(0, "daemon", "start")
	if r := a.must(0, "workflow", "run", "origin/attack"); !strings.Contains(r.stdout+r.stderr, "completed") {
		t.Fatalf("the remote thread: %s", r)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(a.home, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(b)
	}
	for _, name := range []string{"run-env.out", "mcp-env.out", "run-bare.out", "mcp-bare.out"} {
		t.Logf("%s:\n%s", name, read(name))
	}
	// With NERVE_THREAD, the bare name is the remote's: it has none.
	if out := read("run-env.out"); !strings.Contains(out, "rc=1") && !strings.Contains(out, "rc=2") || !strings.Contains(out, "local-wf") {
		t.Errorf("nerve workflow run local-wf inside the remote turn:\n%s", out)
	}
	if out := read("mcp-env.out"); !strings.Contains(out, `"isError":true`) || !strings.Contains(out, "local-wf") {
		t.Errorf("MCP workflow_run local-wf inside the remote turn:\n%s", out)
	}
	// Without it, the daemon refuses by the process that asks.
	const refused = "may not start this machine's local workflows"
	if out := read("run-bare.out"); !strings.Contains(out, refused) || strings.Contains(out, "rc=0") {
		t.Errorf("nerve workflow run local-wf from the remote turn, NERVE_THREAD unset:\n%s", out)
	}
	if out := read("mcp-bare.out"); !strings.Contains(out, refused) {
		t.Errorf("MCP workflow_run local-wf from the remote turn, NERVE_THREAD unset:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(a.home, "local-ran")); err == nil {
		t.Fatal("the local workflow ran from inside a remote turn")
	}
	if r := a.must(0, "workflow", "list"); strings.Contains(r.stdout, "local-wf#") {
		t.Fatalf("a local-wf thread exists:\n%s", r.stdout)
	}
	// From outside any turn, it runs.
	a.must(0, "workflow", "run", "local-wf")
	if _, err := os.Stat(filepath.Join(a.home, "local-ran")); err != nil {
		t.Fatal("local-wf did not run from outside any turn")
	}
}
