package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nerve-agents/nerve/internal/procstat"
	"github.com/nerve-agents/nerve/workspace"
)

// scratchAgent is a turn from someone else's prompt trying what the
// security audit did: rewrite nerve.yaml relative to its cwd (with
// `permissions: workspace` an agent may write under its workdir), then
// saying where it works, how private that is, and what the thread's
// earlier turn left there. hang runs before the answer.
func scratchAgent(hang string) string {
	return `sed -i 's/max_concurrent_turns: [0-9]*/max_concurrent_turns: 7/' nerve.yaml ../nerve.yaml 2>/dev/null
echo 'adapters: {evil: {type: exec, command: [sh]}}' >> nerve.yaml
echo 'adapters: {evil: {type: exec, command: [sh]}}' >> ../nerve.yaml
` + hang + `
[ "$NERVE_STEP" = 1 ] && echo left-by-step-1 > note.txt
echo "cwd=$(pwd -P) workdir=$NERVE_WORKDIR mode=$(stat -c %a .) note=$(cat note.txt 2>/dev/null)"
`
}

// scratchWorkflow is a thread of steps turns of role w.
func scratchWorkflow(steps int, adapter string) string {
	return fmt.Sprintf(`workflow: scratchy
moderator: '$count(messages) < %d ? {"role": "w", "instruction": "go"} : {"done": true}'
roles:
  w: {adapter: %s, prompt: work}
`, steps, adapter)
}

// scratchCache is a cache directory of the test's own for the daemon's
// scratch directories (made before the env, so removed after its daemon
// stopped).
func scratchCache(t *testing.T) string {
	t.Helper()
	cache, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cache
}

// scratchTurns reads the answers of scratchAgent in ref, step by step.
func scratchTurns(t *testing.T, e *env, ref string) []map[string]string {
	t.Helper()
	r := e.must(0, "thread", "messages", ref, "--json")
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct{ Content string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("messages: %v\n%s", err, r)
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(m.Content) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		out = append(out, kv)
	}
	return out
}

// checkConfig: nerve.yaml is as it was, and in force.
func checkConfig(t *testing.T, e *env, config string) {
	t.Helper()
	if b, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml")); string(b) != config {
		t.Fatalf("a turn rewrote nerve.yaml:\n%s", b)
	}
	if st := e.must(0, "daemon", "status", "--json").stdout; !strings.Contains(st, `"capacity":1`) {
		t.Errorf("the daemon reloaded a rewritten nerve.yaml: %s", st)
	}
}

// checkScratch: each turn worked in a 0700 directory under cache, not in
// NERVE_HOME nor inside it.
func checkScratch(t *testing.T, e *env, cache string, turns []map[string]string) {
	t.Helper()
	home, _ := filepath.EvalSymlinks(e.home)
	for _, turn := range turns {
		cwd := turn["cwd"]
		if rel, err := filepath.Rel(home, cwd); err != nil || !strings.HasPrefix(rel, "..") {
			t.Fatalf("a turn worked in %s, in NERVE_HOME %s", cwd, home)
		}
		if !strings.HasPrefix(cwd, cache+string(filepath.Separator)) || turn["workdir"] != cwd || turn["mode"] != "700" {
			t.Errorf("turn %v: want NERVE_WORKDIR its cwd, a 0700 directory under %s", turn, cache)
		}
	}
}

func gone(path string) bool {
	_, err := os.Lstat(path)
	return os.IsNotExist(err)
}

// A remote turn is someone else's prompt: it works in a private scratch
// directory of its own outside NERVE_HOME, removed when the turn ends, and
// cannot reach nerve.yaml relative to its cwd.
func TestE2EScratchRemoteTurn(t *testing.T) {
	cache := scratchCache(t)
	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", scratchAgent(""), "", 1)
	a.extra = append(a.extra, "XDG_CACHE_HOME="+cache)
	config, _ := os.ReadFile(filepath.Join(a.home, "nerve.yaml"))
	a.write("scratchy.yaml", scratchWorkflow(2, "x"))
	a.must(0, "workflow", "push", filepath.Join(a.home, "scratchy.yaml"), "origin")
	a.must(0, "daemon", "start")
	out := decodeRun(t, a.must(0, "workflow", "run", "origin/scratchy", "--json"))
	if out.Status != "completed" {
		t.Fatalf("run: %+v", out)
	}
	checkConfig(t, a, string(config))
	turns := scratchTurns(t, a, out.Thread)
	checkScratch(t, a, cache, turns)
	if len(turns) != 2 || turns[0]["cwd"] == turns[1]["cwd"] || turns[1]["note"] != "" {
		t.Fatalf("want two turns, each in a scratch directory of its own: %v", turns)
	}
	for _, turn := range turns {
		if !gone(turn["cwd"]) {
			t.Errorf("the scratch directory %s outlived its turn", turn["cwd"])
		}
	}
}

// A thread a sense starts has no workdir: its turns share a private
// scratch directory outside NERVE_HOME (notes of one turn are there for
// the next), made again when a daemon restart finds it gone, removed when
// the thread ends.
func TestE2EScratchSenseThread(t *testing.T) {
	cache := scratchCache(t)
	trigger := t.TempDir()
	e := newEnv(t)
	e.unsandboxed("its agent keeps its hung-once flag in NERVE_HOME")
	e.extra = append(e.extra, "XDG_CACHE_HOME="+cache)
	marker := "nerve-test-scratch-" + filepath.Base(e.home)
	// Step 3 hangs the first time, until the daemon is killed.
	e.write("agent.sh", "#!/bin/sh\n"+scratchAgent(fmt.Sprintf(`if [ "$NERVE_STEP" = 3 ] && [ ! -f %[1]s/hung ]; then
  touch %[1]s/hung
  exec sh -c 'sleep 300' %[2]s
fi`, trigger, marker)))
	e.write("workflows/scratchy.yaml", scratchWorkflow(3, "fake"))
	config := e.write("nerve.yaml", fmt.Sprintf(`agent: {max_concurrent_turns: 1}
adapters:
  fake: {type: exec, command: [%s/agent.sh], timeout: 60s}
senses:
  - {name: trigger, kind: file, paths: [%s/go]}
reflexes:
  - {on: trigger, do: workflow, workflow: scratchy}
`, e.home, trigger))
	before, _ := os.ReadFile(config)
	e.must(0, "daemon", "start")
	waitFor(t, "the file sense", func() bool {
		return strings.Contains(e.must(0, "daemon", "status", "--json").stdout, `"state":"watching"`)
	})
	os.WriteFile(filepath.Join(trigger, "go"), []byte("go"), 0o600)
	waitFor(t, "step 3 to hang", func() bool { return len(processesWith(marker)) > 0 })
	ref := "scratchy#thread-1"
	checkConfig(t, e, string(before))
	turns := scratchTurns(t, e, ref)
	checkScratch(t, e, cache, turns)
	if len(turns) != 2 || turns[1]["cwd"] != turns[0]["cwd"] || turns[1]["note"] != "left-by-step-1" {
		t.Fatalf("want two turns in the thread's scratch directory, the second finding the first's note: %v", turns)
	}
	dir := turns[0]["cwd"]

	pid := e.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return procstat.Exited(pid) })
	os.RemoveAll(dir) // a reboot may have cleaned it
	if r := e.must(0, "workflow", "logs", ref, "-f"); !strings.Contains(r.stdout, "thread-1 completed") {
		t.Fatalf("logs after restart: %s", r)
	}
	turns = scratchTurns(t, e, ref)
	if len(turns) != 3 || turns[2]["cwd"] != dir {
		t.Fatalf("want step 3 run again in the thread's scratch directory %s: %v", dir, turns)
	}
	checkScratch(t, e, cache, turns)
	checkConfig(t, e, string(before))
	waitFor(t, "the thread's scratch directory to go", func() bool { return gone(dir) })

	// What a crash left: the scratch directory of a thread not running.
	t.Setenv("XDG_CACHE_HOME", cache)
	left, err := workspace.Scratch{Home: e.home}.Dir("thread-9", 0)
	if err != nil {
		t.Fatal(err)
	}
	var pruned pruneResult
	r := e.must(0, "workspace", "prune", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &pruned); err != nil || !slices.Equal(pruned.Scratch, []string{left}) || !gone(left) {
		t.Fatalf("prune: %s", r)
	}
}

// A thread a sense starts has no directory to resolve a relative
// workspace repo against: it is refused (and logged), rather than resolved
// against NERVE_HOME, which would make whatever repository holds
// NERVE_HOME the thread's.
func TestE2ESenseRelativeWorkspaceRepo(t *testing.T) {
	trigger := t.TempDir()
	e := newEnv(t)
	if out, err := exec.Command("git", "init", "-q", e.home).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	e.write("workflows/wsy.yaml", `workflow: wsy
workspace: {repo: .}
moderator: '{"done": true}'
roles:
  w: {adapter: fake, prompt: work}
`)
	e.write("nerve.yaml", fmt.Sprintf(`adapters:
  fake: {type: exec, command: [true]}
senses:
  - {name: trigger, kind: file, paths: [%s/go]}
reflexes:
  - {on: trigger, do: workflow, workflow: wsy}
`, trigger))
	e.must(0, "daemon", "start")
	waitFor(t, "the file sense", func() bool {
		return strings.Contains(e.must(0, "daemon", "status", "--json").stdout, `"state":"watching"`)
	})
	os.WriteFile(filepath.Join(trigger, "go"), []byte("go"), 0o600)
	waitFor(t, "the reflex's refusal in the log", func() bool {
		log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log"))
		return strings.Contains(string(log), "reflex could not start workflow") && strings.Contains(string(log), "relative")
	})
	if r := e.must(0, "workflow", "logs", "wsy"); strings.Contains(r.stdout, "thread-1") {
		t.Fatalf("a thread started with NERVE_HOME's repository: %s", r)
	}
}
