package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The serving machine decides what it fetches: a thread started through
// the raw API naming a file:// repository on the serving machine that its
// workflow does not declare is answered with error kind workspace, and
// nothing is cloned, run or pushed; a thread on the declared repository
// runs; and remotes.origin.repos lets the owner allow more. On both
// backends.
func TestE2EDaemonFetchesOnlyAllowedRepos(t *testing.T) {
	eachKhalaBackend(t, testDaemonFetchesOnlyAllowedRepos)
}

func testDaemonFetchesOnlyAllowedRepos(t *testing.T, backend string) {
	seed := gitRepo(t)
	shared := filepath.Join(t.TempDir(), "shared.git")
	private := filepath.Join(t.TempDir(), "owners-private.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	git(t, seed, "clone", "-q", "--bare", seed, private)
	base := git(t, shared, "rev-parse", "main")

	k, a, agent := serveTree(t, backend, shared)
	run := func(repo string) (string, []mergeMsg) {
		t.Helper()
		var started struct{ Thread string }
		agent.must(t, "POST", "/v1/workflows/tree/threads", map[string]any{"workspace": map[string]any{"repo": repo, "base": base}}, 201, &started)
		var th struct{ Status string }
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if agent.must(t, "GET", "/v1/threads/"+started.Thread, nil, 200, &th); th.Status != "running" {
				break
			}
		}
		var msgs []mergeMsg
		agent.must(t, "GET", "/v1/threads/"+started.Thread+"/messages", nil, 200, &msgs)
		return th.Status, msgs
	}

	status, msgs := run("file://" + private)
	if status == "running" || len(msgs) == 0 || msgs[0].Error == nil || msgs[0].Error.Kind != "workspace" ||
		!strings.Contains(msgs[0].Error.Message, "agent agent-a does not fetch repository file://"+private) {
		b, _ := json.Marshal(msgs)
		t.Fatalf("a private repository's thread: %s %s; want its turn refused, kind workspace", status, b)
	}
	if refs := git(t, private, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
		t.Fatalf("the private repository got refs:\n%s", refs)
	}
	if mirrors, _ := os.ReadDir(filepath.Join(a.home, "repos")); len(mirrors) != 0 {
		t.Fatalf("the private repository was cloned: %v", mirrors) // the first thread: no mirror before it
	}
	if work, _ := filepath.Glob(filepath.Join(a.home, "worktrees", "*", "work.txt")); len(work) != 0 {
		t.Fatalf("the agent ran: %v", work)
	}

	// The declared repository is served.
	if status, msgs := run(shared); status != "completed" || len(msgs) < 1 || msgs[0].Error != nil || msgs[0].Commit == "" {
		t.Fatalf("the declared repository's thread: %s %+v", status, msgs)
	}

	// The owner allows more: the private repository is served too.
	a.must(0, "daemon", "stop")
	y, err := os.ReadFile(filepath.Join(a.home, "nerve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	allow := strings.Replace(string(y), `origin: {url: "`+k.url+`"}`, `origin: {url: "`+k.url+`", repos: ["file://`+filepath.Dir(private)+`/*.git", "`+shared+`"]}`, 1)
	if allow == string(y) {
		t.Fatalf("nerve.yaml has no origin line to extend:\n%s", y)
	}
	a.write("nerve.yaml", allow)
	a.must(0, "daemon", "start")
	if status, msgs := run("file://" + private); status != "completed" || len(msgs) < 1 || msgs[0].Error != nil || msgs[0].Commit == "" {
		t.Fatalf("an allowed private repository's thread: %s %+v", status, msgs)
	}
}
