package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workspace"
)

// A cloud thread: the CLI resolves --base against the git remote, Khala
// records the workspace, an agent's answer moves the head; thread diff
// and thread checkout read it through the mirror and the remote; prune
// keeps the worktree of a running thread and removes it when it ended.
func TestE2EWorkspaceCloud(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 1)
	e := newEnv(t)
	e.write("nerve.yaml", fmt.Sprintf("agent: {name: cli-a}\nremotes:\n  origin: {url: %q}\n", k.url))
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", tok)
	token, err := os.ReadFile(filepath.Join(e.home, "tokens", "origin"))
	if err != nil {
		t.Fatal(err)
	}
	agent := khNewClient(k.url, strings.TrimSpace(string(token)))

	// The shared git remote: a bare repository on disk.
	src := gitRepo(t)
	bare := filepath.Join(t.TempDir(), "shared.git")
	git(t, src, "clone", "--quiet", "--bare", src, bare)
	user := filepath.Join(t.TempDir(), "user")
	git(t, src, "clone", "--quiet", bare, user)
	base := git(t, src, "rev-parse", "HEAD")

	agent.must(t, "PUT", "/v1/workflows/change", map[string]string{"source": `workflow: change
binding: cloud
moderator: 'last = null ? {"role": "author", "instruction": "edit"} : {"done": true}'
workspace: {repo: ` + bare + `}
roles:
  author: {prompt: p}
`}, 201, nil)
	agent.must(t, "PUT", "/v1/workflows/plain", map[string]string{"source": "workflow: plain\nbinding: cloud\nmoderator: '{\"done\": true}'\nroles:\n  author: {prompt: p}\n"}, 201, nil)

	// Refusals: a base the remote lacks, flags for a workflow without a
	// workspace, a branch git refuses.
	r := e.runIn(user, 2, "workflow", "run", "origin/change", "--base", "no-such-rev", "--detach")
	oneLineError(t, r, "push it first")
	r = e.runIn(user, 2, "workflow", "run", "origin/plain", "--base", "main", "--detach")
	oneLineError(t, r, "workflow origin/plain declares no workspace")
	r = e.runIn(user, 2, "workflow", "run", "origin/change", "--branch", "a..b", "--detach")
	oneLineError(t, r, "not valid in git")

	r = e.runIn(user, 0, "workflow", "run", "origin/change", "--base", "main", "--detach", "--json")
	ref := decodeRun(t, r).Thread
	if ref != "origin/change#thread-1" {
		t.Fatalf("run: %s", r)
	}
	var th struct {
		Workspace struct{ Repo, Base, Branch, Head string }
	}
	agent.must(t, "GET", "/v1/threads/thread-1", nil, 200, &th)
	if th.Workspace.Base != base || th.Workspace.Repo != bare || th.Workspace.Branch != "nerve/change/thread-1" {
		t.Fatalf("thread's workspace: %+v (base %s)", th.Workspace, base)
	}

	// A worktree of the running thread on this machine, as a turn leaves it
	// (the daemon's key of a cloud thread: its ref), one of a local thread
	// that is not running (a crash's leftover), and one an older daemon
	// keyed REMOTE--WORKFLOW--THREAD, which this one never uses again.
	m := &workspace.Manager{Home: e.home}
	running, err := m.Open(context.Background(), workspace.Turn{Key: "origin/change#thread-1", Step: 1,
		Workspace: workspace.Workspace{Repo: bare, Cloud: true, Base: base, Branch: th.Workspace.Branch}})
	if err != nil {
		t.Fatal(err)
	}
	stale, err := m.Open(context.Background(), workspace.Turn{Key: "thread-9", Step: 1,
		Workspace: workspace.Workspace{Repo: user, Base: base, Branch: "nerve/x/thread-9"}})
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := m.Open(context.Background(), workspace.Turn{Key: "origin--change--thread-1", Step: 1,
		Workspace: workspace.Workspace{Repo: bare, Cloud: true, Base: base, Branch: th.Workspace.Branch}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.runIn(user, 0, "workspace", "prune", "--json")
	var pruned pruneResult
	if err := json.Unmarshal([]byte(p.stdout), &pruned); err != nil || len(pruned.Mirrors) != 0 || !slices.Contains(pruned.Worktrees, stale.Dir) ||
		slices.Contains(pruned.Worktrees, running.Dir) || !exists(running.Dir) || exists(legacy.Dir) {
		// (the daemon prune started may have removed the legacy one first)
		t.Fatalf("prune keeps the running thread's worktree and removes the others: %v\n%s", err, p)
	}
	if wt := git(t, user, "worktree", "list"); strings.Contains(wt, stale.Dir) {
		t.Fatalf("the user's repository still lists the pruned worktree:\n%s", wt)
	}

	// The agent's turn: a commit pushed to the thread branch, then the answer.
	var turns []struct{ Turn, Claim string }
	agent.must(t, "POST", "/v1/turns/claim", map[string]any{"max": 1, "wait": "5s"}, 200, &turns)
	if len(turns) != 1 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	work := filepath.Join(t.TempDir(), "work")
	git(t, src, "clone", "--quiet", bare, work)
	os.WriteFile(filepath.Join(work, "CHANGES.md"), []byte("- Retry failed uploads.\n"), 0o644)
	git(t, work, "add", ".")
	git(t, work, "commit", "--quiet", "-m", "author, step 1: retry")
	head := git(t, work, "rev-parse", "HEAD")
	git(t, work, "push", "--quiet", "origin", "HEAD:refs/heads/"+th.Workspace.Branch)
	agent.must(t, "POST", "/v1/turns/"+turns[0].Turn+"/response", map[string]any{"claim": turns[0].Claim, "content": "done",
		"commit": head, "changes": map[string]int{"files": 1, "insertions": 1, "deletions": 0}}, 200, nil)
	e.runIn(user, 0, "workflow", "logs", ref, "-f")

	d := e.runIn(user, 0, "thread", "diff", ref)
	if !strings.Contains(d.stdout, "CHANGES.md | 1 +") || !strings.Contains(d.stdout, "+- Retry failed uploads.") {
		t.Fatalf("thread diff:\n%s", d)
	}
	if s := e.runIn(user, 0, "thread", "diff", ref, "--stat"); !strings.Contains(s.stdout, "1 file changed") || strings.Contains(s.stdout, "@@") {
		t.Fatalf("thread diff --stat:\n%s", s)
	}
	c := e.runIn(user, 0, "thread", "checkout", ref, "--json")
	var co checkoutResult
	if err := json.Unmarshal([]byte(c.stdout), &co); err != nil || co.Branch != th.Workspace.Branch || co.Head != head {
		t.Fatalf("checkout --json: %v\n%s", err, c)
	}
	if got := git(t, user, "rev-parse", "HEAD"); got != head {
		t.Fatalf("user's HEAD %s, want %s", got, head)
	}
	if b, _ := os.ReadFile(filepath.Join(user, "CHANGES.md")); string(b) != "- Retry failed uploads.\n" {
		t.Fatalf("CHANGES.md: %q", b)
	}
	// A second checkout to the same branch is harmless; another name that
	// exists and is not behind is refused.
	e.runIn(user, 0, "thread", "checkout", ref)
	git(t, user, "switch", "--quiet", "-c", "other", "main")
	os.WriteFile(filepath.Join(user, "x"), []byte("x"), 0o644)
	git(t, user, "add", ".")
	git(t, user, "commit", "--quiet", "-m", "x")
	r = e.runIn(user, 2, "thread", "checkout", ref, "--branch", "other")
	oneLineError(t, r, "exists")

	// The thread ended: prune removes its worktree (unless the daemon
	// found it ended first) and the mirror.
	p = e.runIn(user, 0, "workspace", "prune")
	if exists(running.Dir) || !strings.Contains(p.stdout, "removed mirror ") {
		t.Fatalf("prune:\n%s", p)
	}
	p = e.runIn(user, 0, "workspace", "prune", "--json")
	if strings.TrimSpace(p.stdout) != `{"worktrees":[],"mirrors":[],"scratch":[]}` {
		t.Fatalf("second prune: %s", p)
	}

	// A thread without a workspace has nothing to diff.
	r = e.runIn(user, 0, "workflow", "run", "origin/plain", "--detach")
	r = e.runIn(user, 2, "thread", "diff", strings.TrimSpace(r.stdout))
	oneLineError(t, r, "has no workspace")

	// Without flags a cloud thread starts from the definition's repo at the
	// remote's HEAD, resolved to a commit by the CLI.
	r = e.runIn(user, 0, "workflow", "run", "origin/change", "--detach", "--json")
	id := strings.TrimPrefix(decodeRun(t, r).Thread, "origin/change#")
	agent.must(t, "GET", "/v1/threads/"+id, nil, 200, &th)
	if th.Workspace.Base != base || th.Workspace.Repo != bare || th.Workspace.Branch != "nerve/change/"+id {
		t.Fatalf("thread's workspace without flags: %+v (base %s)", th.Workspace, base)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
