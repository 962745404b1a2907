package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `nerve thread checkout` touches the thread's repository only, and never
// a checkout with work in it: the real binary, the real git.

// repoState is what a refused checkout must leave as it was: the branch,
// HEAD, the status and the refs.
func repoState(t *testing.T, dir string) string {
	t.Helper()
	return git(t, dir, "symbolic-ref", "HEAD") + "\n" + git(t, dir, "rev-parse", "HEAD") + "\n" +
		git(t, dir, "status", "--porcelain") + "\n" + git(t, dir, "for-each-ref")
}

// lacks reports whether the repository at dir does not have commit.
func lacks(dir, commit string) bool {
	cmd := exec.Command("git", "cat-file", "-e", commit+"^{commit}")
	cmd.Dir = dir
	return cmd.Run() != nil
}

// A local thread: run inside another project's clone, checkout refuses
// (exit 2, the thread's repository named, a hint with cd and --repo) and
// fetches nothing into it; a worktree of the thread's repository and
// --repo are accepted; uncommitted or untracked work is never switched.
func TestE2ECheckoutRefusesAnotherRepository(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t)
	other := gitRepo(t) // another project, unrelated
	os.WriteFile(filepath.Join(other, "main.go"), []byte("package other\n"), 0o644)
	git(t, other, "add", ".")
	git(t, other, "commit", "--quiet", "-m", "other project")

	r := e.runIn(repo, 0, "workflow", "run", repoFile(t, "examples/code-change.yaml"), "--input", "change=Retry", "--json")
	var run struct {
		Thread    string
		Status    string
		Workspace struct{ Repo, Branch, Head string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || run.Status != "completed" {
		t.Fatalf("run: %v\n%s", err, r)
	}

	before := repoState(t, other)
	r = e.runIn(other, 2, "thread", "checkout", run.Thread)
	oneLineError(t, r, other+" is not the thread's repository "+run.Workspace.Repo)
	if !strings.Contains(r.stderr, "hint: cd "+run.Workspace.Repo+", or name it with --repo "+run.Workspace.Repo) {
		t.Fatalf("no hint naming the thread's repository:\n%s", r.stderr)
	}
	if after := repoState(t, other); after != before {
		t.Fatalf("the other repository changed:\n%s\nwas:\n%s", after, before)
	}
	if !lacks(other, run.Workspace.Head) {
		t.Fatalf("the thread's head %s was fetched into the other repository", run.Workspace.Head)
	}
	// A subdirectory of the other project is the other project.
	sub := filepath.Join(other, "sub")
	os.MkdirAll(sub, 0o755)
	e.runIn(sub, 2, "thread", "checkout", run.Thread, "--branch", "review/a")

	// --repo names the thread's repository from anywhere.
	r = e.runIn(other, 0, "thread", "checkout", run.Thread, "--branch", "review/a", "--repo", repo)
	if !strings.Contains(r.stderr, "switched to branch review/a") || git(t, repo, "rev-parse", "HEAD") != run.Workspace.Head {
		t.Fatalf("checkout --repo: %s", r)
	}
	// A worktree of the thread's repository is the thread's repository.
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, repo, "worktree", "add", "--quiet", "--detach", wt, "main")
	e.runIn(wt, 0, "thread", "checkout", run.Thread, "--branch", "review/b")
	if got := git(t, wt, "branch", "--show-current"); got != "review/b" {
		t.Fatalf("worktree on %q", got)
	}

	// Work in the checkout: an untracked file, then a modified one, is
	// never carried onto another branch, even one git could switch to.
	git(t, repo, "switch", "--quiet", "main")
	os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("mine\n"), 0o644)
	before = repoState(t, repo)
	r = e.runIn(repo, 2, "thread", "checkout", run.Thread, "--branch", "review/c")
	oneLineError(t, r, repo+" has uncommitted changes or untracked files (notes.txt)")
	if !strings.Contains(r.stderr, "hint: commit or stash them") {
		t.Fatalf("no hint:\n%s", r.stderr)
	}
	os.Remove(filepath.Join(repo, "notes.txt"))
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("# edited\n"), 0o644)
	r = e.runIn(repo, 2, "thread", "checkout", run.Thread, "--branch", "review/a") // a fast-forward of an existing branch
	oneLineError(t, r, "has uncommitted changes or untracked files (README.md)")
	if got := git(t, repo, "branch", "--show-current"); got != "main" {
		t.Fatalf("switched to %s with work in the checkout", got)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "README.md")); string(b) != "# edited\n" {
		t.Fatalf("README.md: %q", b)
	}
}

// A cloud thread: a clone of its shared remote is its repository (its
// remote's URL, whichever way it is spelt); another project's clone is
// refused with the thread's repository named, and nothing is fetched
// into it.
func TestE2ECheckoutCloudThreadsRepository(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 1)
	seed := gitRepo(t)
	base := git(t, seed, "rev-parse", "HEAD")
	shared := filepath.Join(t.TempDir(), "shared.git")
	git(t, seed, "clone", "--quiet", "--bare", seed, shared)
	a := agentEnv(t, k, tok, "agent-a", treeScript, ", roles: [author, reviewer]", 1)
	a.must(0, "workflow", "push", a.write("tree.yaml", treeWorkflow(shared)), "origin")
	a.must(0, "daemon", "start")
	id := wsxStart(t, k, a, "tree", shared, base)
	_, _, head := followThread(t, k, a, "tree", id)
	ref := "origin/tree#" + id

	other := gitRepo(t)
	before := repoState(t, other)
	r := a.runIn(other, 2, "thread", "checkout", ref)
	oneLineError(t, r, other+" is not a clone of the thread's repository "+shared)
	if !strings.Contains(r.stderr, "hint: cd into a clone of "+shared+", or name one with --repo DIR") {
		t.Fatalf("no hint:\n%s", r.stderr)
	}
	if after := repoState(t, other); after != before || !lacks(other, head) {
		t.Fatalf("the other clone changed:\n%s\nwas:\n%s", after, before)
	}

	// A clone through a file:// URL and a symbolic link is the same
	// repository.
	link := filepath.Join(t.TempDir(), "link.git")
	if err := os.Symlink(shared, link); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, seed, "clone", "--quiet", "file://"+link, clone)
	a.runIn(other, 0, "thread", "checkout", ref, "--repo", clone)
	if got := git(t, clone, "rev-parse", "HEAD"); got != head {
		t.Fatalf("clone at %s; want the thread's head %s", got, head)
	}
}
