package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// startKhalaOn is startKhala on bbolt, or on a fresh PostgreSQL database.
func startKhalaOn(t testing.TB, backend string) *khalaServer {
	t.Helper()
	if backend != "postgres" {
		return startKhala(t)
	}
	s := &khalaServer{url: "http://" + freeAddr(t), db: filepath.Join(t.TempDir(), "khala.db"), pg: pgtest.Database(t)}
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

func eachKhalaBackend(t *testing.T, test func(t *testing.T, backend string)) {
	for _, b := range []string{"bolt", "postgres"} {
		t.Run(b, func(t *testing.T) { test(t, b) })
	}
}

// A thread created through the raw API with an agent token cannot take
// over a branch that is not its own, on either backend, with a real daemon
// and git: a branch outside nerve/ (the remote's main) is refused at
// creation (400), one the client says the remote has is 409, and one the
// remote has that Khala could not know of fails the thread's turn (kind
// workspace, naming it) before its agent runs; the serving daemon never
// pushes, so the remote's main and the squatted branch stay where they were.
func TestE2EThreadCannotTakeABranchNotItsOwn(t *testing.T) {
	eachKhalaBackend(t, testThreadCannotTakeABranch)
}

func testThreadCannotTakeABranch(t *testing.T, backend string) {
	seed := gitRepo(t)
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	git(t, seed, "push", "-q", shared, "main:refs/heads/nerve/tree/squat")
	base := git(t, shared, "rev-parse", "main")

	_, a, agent := serveTree(t, backend, shared)
	start := func(ws map[string]any) (int, string) {
		ws["base"] = base
		status, body, err := agent.do("POST", "/v1/workflows/tree/threads", map[string]any{"workspace": ws})
		if err != nil {
			t.Fatal(err)
		}
		return status, string(body)
	}

	// The CLI says so before it asks Khala.
	user := filepath.Join(t.TempDir(), "user")
	git(t, seed, "clone", "-q", shared, user)
	for _, b := range []string{"main", "release/1.2"} {
		r := a.runIn(user, 2, "workflow", "run", "origin/tree", "--branch", b, "--detach")
		oneLineError(t, r, "--branch "+b+": a cloud thread's branch is under nerve/")
	}
	if status, body := start(map[string]any{"branch": "main"}); status != 400 || !strings.Contains(body, `workspace.branch \"main\": a cloud thread's branch is under nerve/`) {
		t.Fatalf("branch main: %d %s; want 400 naming it", status, body)
	}
	if status, body := start(map[string]any{"branch": "nerve/tree/squat", "taken": []string{"nerve/tree/squat"}}); status != 409 || !strings.Contains(body, `"branch_taken"`) || !strings.Contains(body, `nerve/tree/squat`) {
		t.Fatalf("a taken branch: %d %s; want 409 naming it", status, body)
	}
	status, body := start(map[string]any{"branch": "nerve/tree/squat"})
	if status != 201 {
		t.Fatalf("start: %d %s", status, body)
	}
	var started struct{ Thread string }
	if err := json.Unmarshal([]byte(body), &started); err != nil || started.Thread == "" {
		t.Fatalf("start: %s", body)
	}

	var th struct {
		Status string
		Error  string
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		agent.must(t, "GET", "/v1/threads/"+started.Thread, nil, 200, &th)
		if th.Status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var msgs []mergeMsg
	agent.must(t, "GET", "/v1/threads/"+started.Thread+"/messages", nil, 200, &msgs)
	if th.Status == "running" || len(msgs) == 0 || msgs[0].Error == nil || msgs[0].Error.Kind != "workspace" ||
		!strings.Contains(msgs[0].Error.Message, `branch "nerve/tree/squat" exists`) || msgs[0].Commit != "" {
		t.Fatalf("thread %s (%s), messages %+v; want its first turn failed, kind workspace, naming the branch", th.Status, th.Error, msgs)
	}
	if got := git(t, shared, "rev-parse", "main"); got != base {
		t.Fatalf("the remote's main moved to %s", got)
	}
	if got := git(t, shared, "rev-parse", "nerve/tree/squat"); got != base {
		t.Fatalf("the squatted branch moved to %s", got)
	}
	if work, _ := filepath.Glob(filepath.Join(a.home, "worktrees", "*", "work.txt")); len(work) != 0 {
		t.Fatalf("the agent ran: %v", work)
	}
}

// serveTree starts a Khala on backend and agent-a's daemon serving the
// tree workflow on shared, and returns a client with agent-a's token (for
// what the API lets an agent do that the CLI would refuse).
func serveTree(t *testing.T, backend, shared string) (*khalaServer, *env, *khClient) {
	t.Helper()
	k := startKhalaOn(t, backend)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", treeScript, ", roles: [author, reviewer]", 1)
	a.must(0, "workflow", "push", a.write("tree.yaml", treeWorkflow(shared)), "origin")
	a.must(0, "daemon", "start")
	token, err := os.ReadFile(filepath.Join(a.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	return k, a, khNewClient(k.url, strings.TrimSpace(string(token)))
}
