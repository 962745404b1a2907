package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// The fan-out example starts one child code-review per item, in parallel,
// and summarises their results; logs show the children as counts and refs.
func TestE2EChildWorkflowsLocal(t *testing.T) {
	e := newEnv(t)
	in := e.write("in.json", `{"changes": ["Retry uploads", "Add a cache", "Drop the legacy API"]}`)
	r := e.must(0, "workflow", "run", repoFile(t, "examples/fan-out.yaml"), "--input-file", in, "--json")
	out := decodeRun(t, r)
	res, _ := out.Result.(map[string]any)
	if out.Status != "completed" || res["reviews"] != 3.0 {
		t.Fatalf("fan-out: %s", r)
	}
	logs := e.must(0, "workflow", "logs", out.Thread)
	if !strings.Contains(logs.stdout, "children: 3 completed (code-review#thread-") {
		t.Fatalf("logs do not count the children:\n%s", logs)
	}
	msgs := e.must(0, "thread", "messages", out.Thread, "--role", "review", "--json")
	if n := strings.Count(msgs.stdout, `"child":"code-review#thread-`); n != 3 {
		t.Fatalf("%d messages name their child:\n%s", n, msgs)
	}
	child := e.must(0, "workflow", "logs", "code-review#thread-3", "-f")
	if !strings.Contains(child.stdout, "thread-3 completed") {
		t.Fatalf("a child is a thread of its own:\n%s", child)
	}
}

// Children nest at most daemon.max_spawn_depth deep: the start beyond it
// is refused and fails the thread that asked, whose parent sees the error.
func TestE2EChildDepthLimit(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "daemon:\n  max_spawn_depth: 2\n")
	e.write("workflows/recurse.yaml", `workflow: recurse
moderator: |
  last = null ? {"workflow": "recurse"} : last.error ? {"fail": last.error.message} : {"done": true}
roles:
  unused: {adapter: example, prompt: x}
`)
	r := e.must(1, "workflow", "run", "recurse", "--json")
	out := decodeRun(t, r)
	if !strings.Contains(out.Error, "beyond max_spawn_depth 2") {
		t.Fatalf("the top thread's error: %s", r)
	}
	// thread-1 (depth 0) -> thread-2 (1) -> thread-3 (2), whose child is refused.
	deep := e.must(0, "workflow", "logs", "recurse#thread-3")
	if !strings.Contains(deep.stdout, "failed: child thread refused: it would be at depth 3, beyond max_spawn_depth 2") {
		t.Fatalf("the deepest thread fails with the refusal:\n%s", deep)
	}
	if r := e.run("workflow", "logs", "recurse#thread-4"); r.code != 2 {
		t.Fatalf("no thread beyond the limit was made: %s", r)
	}
	e.write("bad.yaml", "daemon:\n  max_spawn_depth: -1\n")
	if r := e.run("--config", filepath.Join(e.home, "bad.yaml"), "validate"); r.code != 2 || !strings.Contains(r.stderr+r.stdout, "daemon.max_spawn_depth") {
		t.Fatalf("a negative depth: %s", r)
	}
}

// An agent inside a turn starts a workflow with `nerve workflow run`: the
// new thread is the turn's thread's child, and the command prints its
// result. Cancelling the parent cancels a child still running.
func TestE2EAgentStartedChildAndCancel(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("its agent starts children through nerve.sock and writes their refs into NERVE_HOME")
	marker := "nerve-test-child-" + filepath.Base(e.home)
	e.write("agent.sh", fmt.Sprintf(`#!/bin/sh
case "$NERVE_ROLE" in
lead)
  nerve workflow run quick --input n=7 --json > "$NERVE_HOME/child.json"
  nerve workflow run sleepy --detach > "$NERVE_HOME/sleepy.ref"
  exec sh -c 'sleep 300' %[1]s ;;
nap) exec sh -c 'sleep 300' %[1]s ;;
*) echo "quick $NERVE_ROLE" ;;
esac
`, marker))
	e.write("nerve.yaml", "adapters:\n  sh:\n    type: exec\n    command: ["+e.home+"/agent.sh]\n")
	e.write("workflows/quick.yaml", `workflow: quick
moderator: 'last = null ? {"role": "w"} : {"done": true, "result": input.n}'
inputs: {n: {type: integer}}
roles: {w: {adapter: sh, prompt: x}}
`)
	e.write("workflows/sleepy.yaml", `workflow: sleepy
moderator: 'last = null ? {"role": "nap"} : {"done": true}'
roles: {nap: {adapter: sh, prompt: x}}
`)
	e.write("workflows/boss.yaml", `workflow: boss
moderator: 'last = null ? {"role": "lead"} : {"done": true}'
roles: {lead: {adapter: sh, prompt: x}}
`)
	e.must(0, "workflow", "run", "boss", "--detach")
	waitFor(t, "the agent's children to start", func() bool { return len(processesWith(marker)) >= 2 })
	var child runJSON
	b, _ := os.ReadFile(filepath.Join(e.home, "child.json"))
	if err := json.Unmarshal(b, &child); err != nil || child.Status != "completed" || child.Result != 7.0 {
		t.Fatalf("the attached child run printed %q (%v)", b, err)
	}
	logs := e.must(0, "workflow", "logs", "boss#thread-1")
	if !strings.Contains(logs.stdout, "children: 1 running, 1 completed (quick#thread-2, sleepy#thread-3)") {
		t.Fatalf("the boss's log:\n%s", logs)
	}
	e.must(0, "workflow", "cancel", "boss#thread-1")
	waitFor(t, "the child's adapter to be killed", func() bool { return len(processesWith(marker)) == 0 })
	r := e.must(0, "workflow", "logs", "sleepy#thread-3")
	if !strings.Contains(r.stdout, "thread-3 cancelled") {
		t.Fatalf("the child was not cancelled with its parent:\n%s", r)
	}
}

// A local child survives kill -9 of the daemon: after the restart the child
// resumes, no second child is started, and the parent completes with it.
func TestE2EChildSurvivesKill9(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("its agent keeps its hung-once flag in NERVE_HOME")
	marker := "nerve-test-kid-" + filepath.Base(e.home)
	e.write("agent.sh", fmt.Sprintf(`#!/bin/sh
if [ ! -f "$NERVE_HOME/hung" ]; then touch "$NERVE_HOME/hung"; exec sh -c 'sleep 300' %s; fi
echo "done $NERVE_ROLE"
`, marker))
	e.write("nerve.yaml", "adapters:\n  sh:\n    type: exec\n    command: ["+e.home+"/agent.sh]\n")
	e.write("workflows/kid.yaml", "workflow: kid\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true, \"result\": last.content}'\nroles: {w: {adapter: sh, prompt: x}}\n")
	e.write("workflows/mom.yaml", "workflow: mom\nmoderator: 'last = null ? {\"workflow\": \"kid\"} : {\"done\": true, \"result\": last.content}'\nroles: {unused: {adapter: sh, prompt: x}}\n")
	e.must(0, "workflow", "run", "mom", "--detach")
	waitFor(t, "the child's turn to hang", func() bool { return len(processesWith(marker)) > 0 })
	pid := e.daemonPID()
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the daemon to die", func() bool { return procstat.Exited(pid) })
	r := e.must(0, "workflow", "logs", "mom#thread-1", "-f")
	if !strings.Contains(r.stdout, "thread-1 completed") || !strings.Contains(r.stdout, "done w") {
		t.Fatalf("the parent after the restart:\n%s", r)
	}
	if r := e.run("workflow", "logs", "kid#thread-3"); r.code != 2 {
		t.Fatalf("a second child was started: %s", r)
	}
}
