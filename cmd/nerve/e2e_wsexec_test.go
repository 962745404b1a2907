package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// End-to-end tests of thread workspaces in turns, with the real nerve
// binary and the real git: a shell script plays the agent and edits files
// in $NERVE_WORKDIR.

// kill -9 of the daemon in the middle of a turn that has half-edited its
// worktree: on restart the turn runs again in a worktree at the head it
// started from, and nothing of the killed run reaches the branch.
func TestE2EWorkspaceExecKill9MidTurn(t *testing.T) {
	repo := gitRepo(t)
	before := git(t, repo, "rev-parse", "HEAD")
	e := newEnv(t)
	e.unsandboxed("its agent keeps its hung-once flag in NERVE_HOME")
	marker := "nerve-test-wshang-" + filepath.Base(e.home)
	slowWorkflow(e, 2, fmt.Sprintf(`
echo "step $NERVE_STEP" >> "$NERVE_WORKDIR/work.txt"
if [ "$NERVE_STEP" = 2 ] && [ ! -f %[1]s/hung ]; then
  touch %[1]s/hung
  echo half-done >> "$NERVE_WORKDIR/work.txt"
  exec sh -c 'sleep 300' %[2]s
fi
echo "answer $NERVE_STEP"
`, e.home, marker))
	def := e.write("slow.yaml", fmt.Sprintf(`workflow: slow
workspace: {repo: %s}
moderator: '$count(messages) < 2 ? {"role": "worker", "instruction": "go"} : {"done": true}'
roles:
  worker: {adapter: slow, prompt: work}
`, repo))
	e.must(0, "workflow", "run", def, "--detach")
	waitFor(t, "step 2 to hang", func() bool { return len(processesWith(marker)) > 0 })
	pid := e.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return procstat.Exited(pid) })

	r := e.must(0, "workflow", "logs", "slow#thread-1", "-f")
	if !strings.Contains(r.stdout, "resumed at step 2") || !strings.Contains(r.stdout, "thread-1 completed") {
		t.Fatalf("logs after restart: %s", r)
	}
	branch := "nerve/slow/thread-1"
	if got := git(t, repo, "show", branch+":work.txt"); got != "step 1\nstep 2" {
		t.Fatalf("work.txt on the branch after the crash:\n%s", got)
	}
	if n := git(t, repo, "rev-list", "--count", before+".."+branch); n != "2" {
		t.Errorf("%s commits on the branch; want 2", n)
	}
	if st := git(t, repo, "status", "--porcelain"); st != "" || git(t, repo, "rev-parse", "HEAD") != before {
		t.Errorf("the user's checkout changed: %q", st)
	}
	waitFor(t, "the worktrees to go", func() bool {
		left, _ := os.ReadDir(filepath.Join(e.home, "worktrees"))
		return len(left) == 0
	})
	waitFor(t, "the stale adapter to be killed", func() bool { return len(processesWith(marker)) == 0 })
}

// A cloud code-review through a bare repository on disk, the shared git
// remote, served by two daemons with their own NERVE_HOMEs: each turn
// starts from the commit the other daemon pushed, and Khala records each
// answer's commit and changes and moves the thread's head.
func TestE2EWorkspaceExecCloudAcrossTwoDaemons(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)

	script := `n=$(cat "$NERVE_WORKDIR/review.txt" 2>/dev/null | wc -l | tr -d ' ')
echo "$NERVE_ROLE $NERVE_STEP by $(basename $NERVE_HOME)" >> "$NERVE_WORKDIR/review.txt"
echo "saw $n lines"
`
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", script, ", roles: [author]", 1)
	b := agentEnv(t, k, tok, "agent-b", script, ", roles: [reviewer]", 1)
	def := a.write("cr.yaml", fmt.Sprintf(`workflow: cr
binding: cloud
workspace: {repo: %s}
moderator: '$count(messages) < 4 ? {"role": ($count(messages) %% 2 = 0 ? "author" : "reviewer"), "instruction": "go"} : {"done": true}'
roles:
  author: {adapter: fake, prompt: write}
  reviewer: {adapter: fake, prompt: review}
`, shared))
	a.must(0, "workflow", "push", def, "origin")
	a.must(0, "daemon", "start")
	b.must(0, "daemon", "start")

	id := wsxStart(t, k, a, "cr", shared, base)
	token, err := os.ReadFile(filepath.Join(a.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	ref := "origin/cr#" + id
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r := a.runCtx(ctx, "workflow", "logs", ref, "-f"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Fatalf("thread: %s", r)
	}

	branch := "nerve/cr/" + id
	want := "author 1 by " + filepath.Base(a.home) + "\nreviewer 2 by " + filepath.Base(b.home) +
		"\nauthor 3 by " + filepath.Base(a.home) + "\nreviewer 4 by " + filepath.Base(b.home)
	if got := git(t, shared, "show", branch+":review.txt"); got != want {
		t.Fatalf("review.txt on the shared branch:\n%s\nwant:\n%s", got, want)
	}
	if got := git(t, shared, "log", "--reverse", "--format=%an", base+".."+branch); got != "agent-a\nagent-b\nagent-a\nagent-b" {
		t.Errorf("commit authors:\n%s", got)
	}
	msgs := a.must(0, "thread", "messages", ref, "--json")
	lines := strings.Split(strings.TrimSpace(msgs.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("messages:\n%s", msgs.stdout)
	}
	for i, line := range lines {
		var m struct {
			Content string         `json:"content"`
			Commit  string         `json:"commit"`
			Changes map[string]int `json:"changes"`
		}
		json.Unmarshal([]byte(line), &m)
		if m.Content != fmt.Sprintf("saw %d lines", i) || m.Commit == "" || m.Changes["files"] != 1 || m.Changes["insertions"] != 1 {
			t.Errorf("message %d: %s", i+1, line)
		}
	}
	// Khala moved the thread's head to the last turn's commit.
	req, _ := http.NewRequest(http.MethodGet, k.url+"/v1/threads/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var th struct {
		Workspace struct{ Head, Branch string } `json:"workspace"`
	}
	json.NewDecoder(resp.Body).Decode(&th)
	resp.Body.Close()
	if tip := git(t, shared, "rev-parse", branch); th.Workspace.Head != tip || th.Workspace.Branch != branch {
		t.Errorf("thread's workspace %+v; branch at %s", th.Workspace, tip)
	}
	// The thread ended with agent b's answer: its worktree is gone.
	waitFor(t, "agent b's worktree to go", func() bool {
		left, _ := filepath.Glob(filepath.Join(b.home, "worktrees", "*"))
		return len(left) == 0
	})
}

// wsxStart starts a thread of workflow on Khala with a workspace (the
// run's --repo and --base flags are another change's), as agent e.
func wsxStart(t testing.TB, k *khalaServer, e *env, workflow, repo, base string) string {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(e.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"input": map[string]any{}, "workspace": map[string]string{"repo": repo, "base": base}})
	req, _ := http.NewRequest(http.MethodPost, k.url+"/v1/workflows/"+workflow+"/threads", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var started struct {
		Thread string `json:"thread"`
	}
	json.NewDecoder(resp.Body).Decode(&started)
	if resp.StatusCode != http.StatusCreated || started.Thread == "" {
		t.Fatalf("start: %d %+v", resp.StatusCode, started)
	}
	return started.Thread
}

// Someone pushes to the thread's branch between two turns: the next
// turn's push is refused (a lease on the head it started from, never a
// force), the turn's message says so (error kind workspace), and the
// branch keeps what was pushed.
func TestE2EWorkspaceExecPushRefusedWhenRemoteMoved(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	script := `echo "$NERVE_ROLE $NERVE_STEP" >> "$NERVE_WORKDIR/review.txt"
echo "turn $NERVE_STEP"
`
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", script, ", roles: [author]", 1)
	b := agentEnv(t, k, tok, "agent-b", script, ", roles: [reviewer]", 1)
	def := a.write("cr.yaml", fmt.Sprintf(`workflow: cr
binding: cloud
workspace: {repo: %s}
moderator: '$count(messages) < 2 ? {"role": ($count(messages) = 0 ? "author" : "reviewer"), "instruction": "go"} : {"done": true}'
roles:
  author: {adapter: fake, prompt: write}
  reviewer: {adapter: fake, prompt: review}
`, shared))
	a.must(0, "workflow", "push", def, "origin")
	a.must(0, "daemon", "start")
	id := wsxStart(t, k, a, "cr", shared, base)
	ref := "origin/cr#" + id
	branch := "nerve/cr/" + id
	waitFor(t, "the author's turn", func() bool {
		return strings.Count(a.run("thread", "messages", ref, "--json").stdout, "\n") == 1
	})
	// A person pushes onto the branch before the reviewer's turn.
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, "", "clone", "-q", "--branch", branch, shared, clone)
	os.WriteFile(filepath.Join(clone, "by-hand.txt"), []byte("pushed by a person\n"), 0o600)
	git(t, clone, "add", "by-hand.txt")
	git(t, clone, "commit", "-q", "-m", "by hand")
	git(t, clone, "push", "-q", "origin", branch)
	byHand := git(t, clone, "rev-parse", "HEAD")

	b.must(0, "daemon", "start")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.runCtx(ctx, "workflow", "logs", ref, "-f")
	msgs := strings.Split(strings.TrimSpace(b.must(0, "thread", "messages", ref, "--json").stdout), "\n")
	if len(msgs) != 2 {
		t.Fatalf("messages: %v", msgs)
	}
	var m struct {
		Commit string `json:"commit"`
		Error  struct{ Kind, Message string }
	}
	json.Unmarshal([]byte(msgs[1]), &m)
	if m.Error.Kind != "workspace" || !strings.Contains(m.Error.Message, "refused") || m.Commit != "" {
		t.Fatalf("the reviewer's message: %s", msgs[1])
	}
	if tip := git(t, shared, "rev-parse", branch); tip != byHand {
		t.Fatalf("branch at %s; the person's push %s was overwritten", tip, byHand)
	}
}
