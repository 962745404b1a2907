package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A cloud thread whose default branch the shared remote has already (a
// Khala started afresh on a repository another one used): the run sees it
// before the thread starts, the thread takes the next free name and says
// so, its first turn pushes there, and the old branch is left as it was.
func TestE2ECloudDefaultBranchTakenOnRemote(t *testing.T) {
	seed := gitRepo(t)
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	// Another Khala's threads 1 (twice over) left their branches.
	git(t, seed, "push", "-q", shared, "main:refs/heads/nerve/tree/thread-1", "main:refs/heads/nerve/tree/thread-1-2")
	old := git(t, shared, "rev-parse", "nerve/tree/thread-1")
	user := filepath.Join(t.TempDir(), "user")
	git(t, seed, "clone", "-q", shared, user)

	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", treeScript, ", roles: [author, reviewer]", 1)
	a.must(0, "workflow", "push", a.write("tree.yaml", treeWorkflow(shared)), "origin")
	a.must(0, "daemon", "start")

	r := a.runIn(user, 0, "workflow", "run", "origin/tree", "--detach", "--json")
	id := strings.TrimPrefix(decodeRun(t, r).Thread, "origin/tree#")
	want := "branch nerve/tree/thread-1 exists on " + shared + " already: origin/tree#thread-1 works on branch nerve/tree/thread-1-3\n"
	if id != "thread-1" || r.stderr != want {
		t.Fatalf("run: %s\nwant on stderr: %s", r, want)
	}
	msgs, _, head := followThread(t, k, a, "tree", id)
	for _, m := range msgs {
		if m.Error != nil {
			t.Fatalf("step %d failed: %+v", m.Step, m.Error)
		}
	}
	var th struct {
		Workspace struct{ Branch string } `json:"workspace"`
	}
	khGet(t, k, a, "/v1/threads/"+id, &th)
	if th.Workspace.Branch != "nerve/tree/thread-1-3" || git(t, shared, "rev-parse", "nerve/tree/thread-1-3") != head {
		t.Fatalf("thread's branch %q; want nerve/tree/thread-1-3 at its head %s", th.Workspace.Branch, head)
	}
	if got := git(t, shared, "rev-parse", "nerve/tree/thread-1"); got != old {
		t.Fatalf("the old branch moved to %s", got)
	}
	// The next thread's default is free: no note, no suffix.
	r = a.runIn(user, 0, "workflow", "run", "origin/tree", "--detach", "--json")
	if decodeRun(t, r).Thread != "origin/tree#thread-2" || r.stderr != "" {
		t.Fatalf("second run: %s", r)
	}
	var th2 struct {
		Workspace json.RawMessage `json:"workspace"`
	}
	khGet(t, k, a, "/v1/threads/thread-2", &th2)
	if !strings.Contains(string(th2.Workspace), `"branch":"nerve/tree/thread-2"`) {
		t.Fatalf("second thread's workspace: %s", th2.Workspace)
	}
}
