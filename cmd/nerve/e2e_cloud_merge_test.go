package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// End-to-end tests of a cloud thread's parallel round with a workspace:
// the real nerve binary, a real Khala, daemons with their own NERVE_HOMEs
// and a bare git repository on disk as the shared remote. Khala queues a
// merge turn when the round's last answer is in; a daemon merges.

// mergeScript plays every role: each parallel role writes its own file (or,
// the clash roles, the same file differently); the next turn lists what it
// finds in its worktree, so it shows it started from the merge.
const mergeScript = `cd "$NERVE_WORKDIR"
case "$NERVE_ROLE" in
left) echo left > left.txt;;
right) echo right > right.txt;;
clash1) echo one > same.txt;;
clash2) echo two > same.txt;;
next) echo "files: $(ls | tr '\n' ' ')"; exit 0;;
esac
echo "$NERVE_ROLE done"
`

// mergeWorkflow runs roles a and b in parallel, then next, then ends.
func mergeWorkflow(name, shared, a, b, claim string) string {
	return fmt.Sprintf(`workflow: %s
binding: cloud
workspace: {repo: %s}
limits: {claim: %s}
moderator: |
  $count(messages) = 0 ? [{"role": "%s", "instruction": "go"}, {"role": "%s", "instruction": "go"}]
  : $count(messages) = 2 ? {"role": "next", "instruction": "look"} : {"done": true}
roles:
  %s: {adapter: fake, prompt: p}
  %s: {adapter: fake, prompt: p}
  next: {adapter: fake, prompt: p}
`, name, shared, claim, a, b, a, b)
}

// khGet reads a Khala endpoint as agent e into out.
func khGet(t testing.TB, k *khalaServer, e *env, path string, out any) {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(e.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, k.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

type mergeMsg struct {
	Step    int    `json:"step"`
	Role    string `json:"role"`
	Content string `json:"content"`
	Commit  string `json:"commit"`
	Error   *struct {
		Kind, Message string
	} `json:"error"`
}

type traceEvent struct {
	At      time.Time `json:"at"`
	Type    string    `json:"type"`
	Step    int       `json:"step"`
	Role    string    `json:"role"`
	Agent   string    `json:"agent"`
	Message string    `json:"message"`
}

// followThread waits for the thread to end and returns its messages,
// trace and head.
func followThread(t testing.TB, k *khalaServer, e *env, wf, id string) ([]mergeMsg, []traceEvent, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if r := e.runCtx(ctx, "workflow", "logs", "origin/"+wf+"#"+id, "-f"); r.code != 0 || !strings.Contains(r.stdout, "completed") {
		if os.Getenv("NERVE_TEST_DEBUG") != "" {
			logs, _ := filepath.Glob(filepath.Join(os.TempDir(), "nh*", "nerve.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
		t.Fatalf("thread: %s", r)
	}
	var msgs []mergeMsg
	khGet(t, k, e, "/v1/threads/"+id+"/messages", &msgs)
	var evs []traceEvent
	khGet(t, k, e, "/v1/threads/"+id+"/trace", &evs)
	var th struct {
		Workspace struct{ Head string } `json:"workspace"`
	}
	khGet(t, k, e, "/v1/threads/"+id, &th)
	return msgs, evs, th.Workspace.Head
}

// handover returns how long after the last answer of steps up to from the
// turn of step to was queued, from the trace.
func handover(evs []traceEvent, from, to int) time.Duration {
	var answered, queued time.Time
	for _, ev := range evs {
		switch {
		case ev.Step <= from && (ev.Type == "turn.answered" || ev.Type == "turn.failed") && ev.At.After(answered):
			answered = ev.At
		case ev.Step == to && ev.Type == "turn.queued":
			queued = ev.At
		}
	}
	return queued.Sub(answered)
}

// Two daemons whose claim filters split the roles between them: a
// parallel round of two turns that touch different files is merged into
// the branch in step order by a merge turn (claimed whatever the roles),
// and the next turn starts from the merge; a round whose turns conflict
// puts kind merge on the second step's message and leaves the branch at
// the first step's commit.
func TestE2ECloudParallelMerge(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", mergeScript, ", roles: [left, clash1, next]", 2)
	b := agentEnv(t, k, tok, "agent-b", mergeScript, ", roles: [right, clash2]", 2)
	a.must(0, "workflow", "push", a.write("split.yaml", mergeWorkflow("split", shared, "left", "right", "1m")), "origin")
	a.must(0, "workflow", "push", a.write("clash.yaml", mergeWorkflow("clash", shared, "clash1", "clash2", "1m")), "origin")
	a.must(0, "daemon", "start")
	b.must(0, "daemon", "start")

	t.Run("merged", func(t *testing.T) {
		id := wsxStart(t, k, a, "split", shared, base)
		msgs, evs, head := followThread(t, k, a, "split", id)
		branch := "nerve/split/" + id
		if len(msgs) != 3 || msgs[0].Error != nil || msgs[1].Error != nil {
			t.Fatalf("messages: %+v", msgs)
		}
		if want := "files: README.md left.txt right.txt "; msgs[2].Content != want {
			t.Errorf("the turn after the merge saw %q; want %q", msgs[2].Content, want)
		}
		// Step 1 fast-forwarded, step 2 merged onto it: the branch is a
		// merge commit whose parents are steps 1 and 2 (the next turn
		// changed nothing).
		merge := git(t, shared, "rev-parse", branch)
		if head != merge {
			t.Errorf("thread head %s; branch at %s", head, merge)
		}
		if p := git(t, shared, "rev-parse", merge+"^1", merge+"^2"); p != msgs[0].Commit+"\n"+msgs[1].Commit {
			t.Errorf("merge %s parents:\n%s\nwant steps 1 and 2: %s %s", merge, p, msgs[0].Commit, msgs[1].Commit)
		}
		if refs := git(t, shared, "for-each-ref", "refs/nerve/"); refs != "" {
			t.Errorf("turn refs left after the merge:\n%s", refs)
		}
		merges := 0
		for _, ev := range evs {
			if ev.Role == "nerve.merge" && ev.Type == "turn.answered" {
				merges++
			}
		}
		if merges != 1 {
			t.Errorf("%d merge turns answered; want 1", merges)
		}
		t.Logf("handover after the parallel round (answer of step 2 to step 3 queued, through the merge turn): %s", handover(evs, 2, 3))
	})

	t.Run("conflict", func(t *testing.T) {
		id := wsxStart(t, k, a, "clash", shared, base)
		msgs, _, head := followThread(t, k, a, "clash", id)
		branch := "nerve/clash/" + id
		if len(msgs) != 3 || msgs[0].Error != nil {
			t.Fatalf("messages: %+v", msgs)
		}
		if e := msgs[1].Error; e == nil || e.Kind != "merge" || e.Message != "same.txt" {
			t.Fatalf("step 2's error: %+v; want kind merge naming same.txt", e)
		}
		if tip := git(t, shared, "rev-parse", branch); tip != msgs[0].Commit || head != tip {
			t.Errorf("branch at %s, thread head %s; want step 1's commit %s", tip, head, msgs[0].Commit)
		}
		if want := "files: README.md same.txt "; msgs[2].Content != want {
			t.Errorf("the turn after the conflict saw %q; want %q", msgs[2].Content, want)
		}
		if got := git(t, shared, "show", branch+":same.txt"); got != "one" {
			t.Errorf("same.txt on the branch: %q", got)
		}
		// Step 2's commit is kept for a person to look at.
		if refs := git(t, shared, "for-each-ref", "--format=%(objectname)", "refs/nerve/"); refs != msgs[1].Commit {
			t.Errorf("turn refs: %q; want step 2's commit %s", refs, msgs[1].Commit)
		}
		r := a.must(0, "workflow", "logs", "origin/clash#"+id)
		if !strings.Contains(r.stdout, "error (merge): same.txt") {
			t.Errorf("logs do not show the conflict:\n%s", r.stdout)
		}
	})
}

// A daemon killed -9 while it holds the merge turn, after it pushed the
// merge and before its answer: the lease runs out, the turn is re-leased
// to another daemon, which finds the merge on the branch and answers it;
// the branch has the one merge, and the thread goes on from it.
func TestE2ECloudMergeKilledDaemon(t *testing.T) {
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "-q", "--bare", seed, shared)
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", mergeScript, "", 2)
	b := agentEnv(t, k, tok, "agent-b", mergeScript, "", 2)
	// Agent a's git holds on after it pushed the thread branch with a lease
	// (only the merge does that in this thread before step 3: it is the
	// round's first push, leased on the branch's absence): it is killed there.
	hold := filepath.Join(a.home, "hold")
	a.write("bin/git", fmt.Sprintf(`#!/bin/sh
%[1]s "$@"
rc=$?
case "$*" in *force-with-lease=refs/heads/nerve/*)
  if [ $rc = 0 ] && [ -f %[2]s ]; then rm -f %[2]s; echo $$ > %[2]s.pid; exec sleep 300; fi;;
esac
exit $rc
`, realGit, hold))
	a.extra = append(a.extra, "PATH="+filepath.Join(a.home, "bin")+":"+os.Getenv("PATH"))
	t.Cleanup(func() {
		if b, err := os.ReadFile(hold + ".pid"); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	a.write("hold", "")
	a.must(0, "workflow", "push", a.write("split.yaml", mergeWorkflow("split", shared, "left", "right", "3s")), "origin")
	a.must(0, "daemon", "start")
	id := wsxStart(t, k, a, "split", shared, base)
	branch := "nerve/split/" + id
	waitFor(t, "agent a to push the merge", func() bool {
		_, err := os.Stat(hold + ".pid")
		return err == nil
	})
	pushed := git(t, shared, "rev-parse", branch)
	pid := a.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "agent a to die", func() bool { return procstat.Exited(pid) })
	b.must(0, "daemon", "start")

	msgs, evs, head := followThread(t, k, b, "split", id)
	if len(msgs) != 3 || msgs[0].Error != nil || msgs[1].Error != nil {
		t.Fatalf("messages: %+v", msgs)
	}
	if want := "files: README.md left.txt right.txt "; msgs[2].Content != want {
		t.Errorf("the turn after the merge saw %q; want %q", msgs[2].Content, want)
	}
	// The branch went on from what agent a pushed: its merge is the one.
	if n := git(t, shared, "rev-list", "--merges", "--count", base+".."+branch); n != "1" {
		t.Errorf("%s merge commits on the branch; want 1", n)
	}
	if git(t, shared, "merge-base", "--is-ancestor", pushed, branch) != "" || head != git(t, shared, "rev-parse", branch) {
		t.Errorf("branch does not go on from agent a's merge %s (head %s)", pushed, head)
	}
	started, expired := map[string]bool{}, 0
	for _, ev := range evs {
		if ev.Role != "nerve.merge" {
			continue
		}
		switch ev.Type {
		case "turn.started":
			started[ev.Agent] = true
		case "turn.expired":
			expired++
		}
	}
	if !started["agent-a"] || !started["agent-b"] || expired != 1 {
		t.Errorf("merge turn: started by %v, expired %d times; want a then b, once", started, expired)
	}
}
