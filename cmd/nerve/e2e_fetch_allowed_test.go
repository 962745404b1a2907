package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The serving machine decides what it fetches, and Khala hands it only
// what it fetches: a thread started through the raw API naming a file://
// repository on the serving machine that its workflow does not declare is
// not claimed by that machine (its turn stays queued, nothing is cloned,
// run or pushed) while a thread on the declared repository runs; once the
// owner allows more with remotes.origin.repos, the waiting thread is
// claimed and runs. On both backends.
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
	start := func(repo string) string {
		t.Helper()
		var started struct{ Thread string }
		agent.must(t, "POST", "/v1/workflows/tree/threads", map[string]any{"workspace": map[string]any{"repo": repo, "base": base}}, 201, &started)
		return started.Thread
	}
	wait := func(thread string) (string, []mergeMsg) {
		t.Helper()
		var th struct{ Status string }
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if agent.must(t, "GET", "/v1/threads/"+thread, nil, 200, &th); th.Status != "running" {
				break
			}
		}
		var msgs []mergeMsg
		agent.must(t, "GET", "/v1/threads/"+thread+"/messages", nil, 200, &msgs)
		return th.Status, msgs
	}

	// The private repository's thread first, so the daemon's claims meet
	// it before the declared one's.
	privateThread := start("file://" + private)
	if status, msgs := wait(start(shared)); status != "completed" || len(msgs) < 1 || msgs[0].Error != nil || msgs[0].Commit == "" {
		t.Fatalf("the declared repository's thread: %s %+v", status, msgs)
	}
	var events []struct{ Type, Agent string }
	agent.must(t, "GET", "/v1/threads/"+privateThread+"/trace", nil, 200, &events)
	for _, e := range events {
		if e.Type == "turn.started" {
			t.Fatalf("agent %s claimed the private repository's turn: %+v", e.Agent, events)
		}
	}
	var th struct{ Status string }
	var msgs []mergeMsg
	agent.must(t, "GET", "/v1/threads/"+privateThread, nil, 200, &th)
	agent.must(t, "GET", "/v1/threads/"+privateThread+"/messages", nil, 200, &msgs)
	if th.Status != "running" || len(msgs) != 0 {
		t.Fatalf("the private repository's thread: %s %+v; want it running, its turn unclaimed", th.Status, msgs)
	}
	if refs := git(t, private, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
		t.Fatalf("the private repository got refs:\n%s", refs)
	}
	if mirrors, _ := filepath.Glob(filepath.Join(a.home, "repos", "*private*")); len(mirrors) != 0 {
		t.Fatalf("the private repository was cloned: %v", mirrors)
	}

	// The owner allows more: the waiting thread is claimed and served.
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
	if status, msgs := wait(privateThread); status != "completed" || len(msgs) < 1 || msgs[0].Error != nil || msgs[0].Commit == "" {
		b, _ := json.Marshal(msgs)
		t.Fatalf("an allowed private repository's thread: %s %s", status, b)
	}
}
