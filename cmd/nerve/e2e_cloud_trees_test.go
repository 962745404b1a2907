package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// End-to-end tests of where a cloud thread's worktree lives: the real
// nerve binary, real Khalas on loopback, a bare repository on disk as the
// shared git remote.

// treeScript plays both roles: the author writes a file; the reviewer
// holds its turn while the file "hold" is in its NERVE_HOME (30 s at
// most), so a test sees the thread running on the other machine.
const treeScript = `cd "$NERVE_WORKDIR"
case "$NERVE_ROLE" in
author) echo "step $NERVE_STEP" >> work.txt;;
reviewer) i=0; while [ -f "$NERVE_HOME/hold" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done;;
esac
echo "$NERVE_ROLE done"
`

// treeWorkflow is author, then reviewer, then the end.
func treeWorkflow(shared string) string {
	return fmt.Sprintf(`workflow: tree
binding: cloud
workspace: {repo: %s}
moderator: '$count(messages) = 0 ? {"role": "author", "instruction": "go"} : $count(messages) = 1 ? {"role": "reviewer", "instruction": "look"} : {"done": true}'
roles:
  author: {adapter: fake, prompt: p}
  reviewer: {adapter: fake, prompt: p}
`, shared)
}

// treeKeys are the thread keys of the worktrees in home, from their
// records.
func treeKeys(t testing.TB, home string) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(home, "worktrees", "*.json"))
	var keys []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // removed meanwhile
		}
		var md struct{ Key string }
		if err := json.Unmarshal(b, &md); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		keys = append(keys, md.Key)
	}
	return keys
}

// waitTrace waits for an event of type typ at step in the thread's trace.
func waitTrace(t testing.TB, k *khalaServer, e *env, id, typ string, step int) traceEvent {
	t.Helper()
	var found traceEvent
	waitFor(t, fmt.Sprintf("%s of step %d of %s", typ, step, id), func() bool {
		var evs []traceEvent
		khGet(t, k, e, "/v1/threads/"+id+"/trace", &evs)
		for _, ev := range evs {
			if ev.Type == typ && ev.Step == step {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// A cloud thread's worktree goes from a machine as soon as another
// machine takes the thread's next turn (while the thread still runs), and
// a worktree whose thread ended while its daemon was down goes when that
// daemon starts again.
func TestE2ECloudTreeGoesWhenThreadMovesOrEnds(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", treeScript, ", roles: [author]", 1)
	a.unsandboxed("its agents wait on a hold file in NERVE_HOME")
	b := agentEnv(t, k, tok, "agent-b", treeScript, ", roles: [reviewer]", 1)
	b.unsandboxed("its agents wait on a hold file in NERVE_HOME")
	a.must(0, "workflow", "push", a.write("tree.yaml", treeWorkflow(shared)), "origin")
	a.must(0, "daemon", "start")
	b.must(0, "daemon", "start")

	// Agent b holds the reviewer's turn: the thread runs on b now, and a's
	// worktree of it goes.
	b.write("hold", "")
	id := wsxStart(t, k, a, "tree", shared, base)
	waitTrace(t, k, a, id, "turn.answered", 1)
	if got := treeKeys(t, a.home); len(got) != 1 || got[0] != "origin/tree#"+id {
		t.Fatalf("agent a's worktrees after its turn: %v; want the thread's", got)
	}
	if ev := waitTrace(t, k, a, id, "turn.started", 2); ev.Agent != "agent-b" {
		t.Fatalf("step 2 taken by %q", ev.Agent)
	}
	waitFor(t, "agent a's worktree to go once agent b took the next turn", func() bool { return len(treeKeys(t, a.home)) == 0 })
	var th struct{ Status string }
	khGet(t, k, a, "/v1/threads/"+id, &th)
	if th.Status != "running" {
		t.Fatalf("thread %s: %s; the worktree was to go while it runs elsewhere", id, th.Status)
	}
	os.Remove(filepath.Join(b.home, "hold"))
	followThread(t, k, a, "tree", id)
	waitFor(t, "agent b's worktree to go with the thread's end", func() bool { return len(treeKeys(t, b.home)) == 0 })

	// Agent a runs the author's turn while nobody serves the reviewer: it
	// keeps its worktree for the thread, which may come back to it.
	b.must(0, "daemon", "stop")
	id = wsxStart(t, k, a, "tree", shared, base)
	waitTrace(t, k, a, id, "turn.answered", 1)
	time.Sleep(treeCheckFirstForTest + 3*time.Second) // its first checks: the latest turn is its own
	if got := treeKeys(t, a.home); len(got) != 1 || got[0] != "origin/tree#"+id {
		t.Fatalf("agent a's worktrees while its thread waits: %v; want the thread's", got)
	}
	// Its daemon stops; the thread ends on agent b meanwhile; a's daemon,
	// started again, removes the worktree (it knows it from disk).
	a.must(0, "daemon", "stop")
	b.must(0, "daemon", "start")
	followThread(t, k, b, "tree", id)
	if got := treeKeys(t, a.home); len(got) != 1 {
		t.Fatalf("agent a's worktrees while its daemon is down: %v", got)
	}
	a.must(0, "daemon", "start")
	waitFor(t, "agent a's worktree of the ended thread to go after its restart", func() bool { return len(treeKeys(t, a.home)) == 0 })
}

// treeCheckFirstForTest is daemon.treeCheckFirst, the pause before a
// worktree's first check after a turn.
const treeCheckFirstForTest = 2 * time.Second

// A remote whose name holds "--" beside one that is its prefix (o and
// o--x): the worktree of a thread of o--x is keyed by the thread's ref,
// which reads back as o--x's thread whichever remote is tried first;
// prune keeps it while the thread runs there and removes it once it ended.
func TestE2ECloudTreeKeyOfRemoteWithDashes(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	ko, kx := startKhala(t), startKhala(t)
	e := newEnv(t)
	e.write("agent.sh", "#!/bin/sh\n"+treeScript)
	e.write("nerve.yaml", fmt.Sprintf(`agent: {name: agent-a}
remotes:
  o: {url: "%s"}
  o--x: {url: "%s"}
adapters:
  fake: {type: exec, command: [%s/agent.sh], timeout: 60s}
senses:
  - {name: queue, kind: khala, remote: o--x, roles: [author]}
reflexes:
  - {on: queue, do: turn, adapter: fake}
daemon: {shutdown_grace: 1s}
`, ko.url, kx.url, e.home))
	e.run("init", "--remote", "o="+ko.url, "--enroll-token", ko.enrollToken(t, 1)) // 1: o--x not enrolled yet
	e.must(0, "init", "--remote", "o--x="+kx.url, "--enroll-token", kx.enrollToken(t, 1))
	e.must(0, "workflow", "push", e.write("tree.yaml", treeWorkflow(shared)), "o--x")
	e.must(0, "daemon", "start")

	tok, err := os.ReadFile(filepath.Join(e.home, "tokens", "o--x"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.home, "tokens", "origin"), tok, 0o600) // for wsxStart and khGet
	id := wsxStart(t, kx, e, "tree", shared, base)
	waitTrace(t, kx, e, id, "turn.answered", 1)
	keys := treeKeys(t, e.home)
	if len(keys) != 1 {
		t.Fatalf("worktrees after the turn: %v", keys)
	}
	ref, ok := workspaceKeyRef(keys[0])
	if !ok || ref.Remote != "o--x" || ref.Workflow != "tree" || ref.Thread != id {
		t.Fatalf("worktree key %q reads as %+v, %v; want o--x's tree#%s", keys[0], ref, ok, id)
	}
	// Nobody serves the reviewer: the thread runs, its worktree stays.
	if r := e.must(0, "workspace", "prune", "--json"); r.stdout != "{\"worktrees\":[],\"mirrors\":[],\"scratch\":[]}\n" {
		t.Fatalf("prune while the thread runs on o--x: %s", r)
	}
	e.must(0, "workflow", "cancel", "o--x/tree#"+id)
	e.must(0, "workspace", "prune")
	if got := treeKeys(t, e.home); len(got) != 0 {
		t.Fatalf("worktrees after the thread was cancelled and pruned: %v", got)
	}
}
