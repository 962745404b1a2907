package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/tarpit"
)

// End-to-end tests of threads whose repository is hostile: one that never
// answers, one whose URL runs a command. The real nerve binary, a real
// Khala on loopback, a serving daemon with an exec agent.

// hostileWorkflow is one author turn, then the end (whatever the turn
// answered).
func hostileWorkflow(shared string) string {
	return fmt.Sprintf(`workflow: hostile
binding: cloud
workspace: {repo: %s}
moderator: '$count(messages) = 0 ? {"role": "author", "instruction": "go"} : {"done": true}'
roles:
  author: {adapter: fake, prompt: p}
`, shared)
}

// hostileAgent is agent e's daemon config with workspace: extra appended,
// allowed to fetch repos (remotes.origin.repos): the git calls themselves
// are what these tests attack, not the allow-list that would refuse these
// threads before any git call.
func hostileAgent(t *testing.T, k *khalaServer, slots int, workspaceYAML string, repos ...string) *env {
	tok := k.enrollToken(t, 1)
	e := agentEnv(t, k, tok, "agent-a", `cd "$NERVE_WORKDIR" && echo "step $NERVE_STEP" >> work.txt && echo done`+"\n", "", slots)
	cfg, err := os.ReadFile(filepath.Join(e.home, "nerve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal(repos)
	allowed := strings.Replace(string(cfg), "origin: {url: ", "origin: {repos: "+string(list)+", url: ", 1)
	if allowed == string(cfg) {
		t.Fatalf("no remote origin to widen in:\n%s", cfg)
	}
	e.write("nerve.yaml", allowed+workspaceYAML)
	return e
}

// threadMessages reads a thread's messages as agent e.
func threadMessages(t *testing.T, k *khalaServer, e *env, id string) []mergeMsg {
	var msgs []mergeMsg
	khGet(t, k, e, "/v1/threads/"+id+"/messages", &msgs)
	return msgs
}

// Eight threads whose repository never answers, queued before a normal
// one on a daemon with two slots: each tarpit turn ends at the fetch
// deadline (2 s here, from nerve.yaml) with error kind workspace, later
// ones at once, and the normal thread is served within the deadline plus
// one second of its start.
func TestE2ETarpitRepoDoesNotFreezeDaemon(t *testing.T) {
	const deadline = 2 * time.Second
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	pit := "http://" + tarpit.Listen(t) + "/shared.git"
	k := startKhala(t)
	a := hostileAgent(t, k, 2, "workspace: {fetch_timeout: 2s}\n", pit, shared)
	a.unsandboxed("the 3 s figure is the git deadline's and back-off's; a sandbox's start (BenchmarkTurn/local-thread-sandboxed) is not what it measures")
	a.must(0, "workflow", "push", a.write("hostile.yaml", hostileWorkflow(shared)), "origin")
	a.must(0, "daemon", "start")
	t.Logf("set up at %s", time.Now().Format(time.StampMilli))

	var pits []string
	for range 8 {
		pits = append(pits, wsxStart(t, k, a, "hostile", pit, base))
	}
	started := time.Now()
	normal := wsxStart(t, k, a, "hostile", shared, base)
	ev := waitTrace(t, k, a, normal, "turn.answered", 1)
	served := time.Since(started)
	t.Logf("normal thread answered %s after its start, behind 8 tarpit threads (git deadline %s, figure: within %s)",
		served.Round(10*time.Millisecond), deadline, deadline+time.Second)
	if served > deadline+time.Second {
		t.Errorf("normal thread served %s after its start (answered at %s); want within %s", served, ev.At, deadline+time.Second)
	}
	if msgs := threadMessages(t, k, a, normal); len(msgs) != 1 || msgs[0].Error != nil || msgs[0].Commit == "" {
		t.Errorf("normal thread's messages: %+v", msgs)
	}
	for _, id := range pits {
		waitTrace(t, k, a, id, "turn.failed", 1)
		msgs := threadMessages(t, k, a, id)
		if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Kind != "workspace" {
			t.Fatalf("tarpit thread %s's messages: %+v; want one failed turn of kind workspace", id, msgs)
		}
		if m := msgs[0].Error.Message; !strings.Contains(m, "fetch_timeout") {
			t.Errorf("tarpit thread %s's error %q does not name the deadline", id, m)
		}
	}
	// The CLI's git has the same deadline: thread diff of a tarpit thread
	// fails (exit 1) once it passes.
	began := time.Now()
	r := a.run("thread", "diff", "origin/hostile#"+pits[0])
	if r.code != 1 || time.Since(began) > deadline+5*time.Second {
		t.Fatalf("thread diff of a tarpit thread after %s: %s", time.Since(began), r)
	}
	oneLineError(t, r, "within 2s (workspace.fetch_timeout)")
	t.Logf("nerve thread diff of a tarpit thread, after %s:\n%s", time.Since(began).Round(10*time.Millisecond), r.stderr)
	if left := processesWith(strings.TrimPrefix(pit, "http://")); len(left) > 0 {
		t.Errorf("git processes for the tarpit outlived their turns: %v", left)
	}
}

// A thread whose repository is ext::COMMAND never runs it, even when the
// serving machine's ~/.gitconfig allows every protocol: the turn fails
// with error kind workspace.
func TestE2EExtRepoNeverRuns(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	k := startKhala(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	ext := "ext::sh -c touch% " + marker
	a := hostileAgent(t, k, 1, "", ext, shared)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[protocol]\n\tallow = always\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.extra = append(a.extra, "HOME="+home)
	a.must(0, "workflow", "push", a.write("hostile.yaml", hostileWorkflow(shared)), "origin")
	a.must(0, "daemon", "start")

	id := wsxStart(t, k, a, "hostile", ext, base)
	waitTrace(t, k, a, id, "turn.failed", 1)
	msgs := threadMessages(t, k, a, id)
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Kind != "workspace" {
		t.Fatalf("messages: %+v; want one failed turn of kind workspace", msgs)
	}
	if strings.Contains(msgs[0].Error.Message, "does not fetch") {
		t.Fatalf("the allow-list refused the thread, so git's protocol pin went untried: %s", msgs[0].Error.Message)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the ext:: repository's command ran (error: %s)", msgs[0].Error.Message)
	}
}
