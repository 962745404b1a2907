package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputs: each refusal is a workspace error of one sentence with
// the right sentinel, and leaves nothing behind.
func TestBadInputs(t *testing.T) {
	repo := newRepo(t)
	remote := newRemote(t)
	m := newManager(t)
	gitT(t, repo, "branch", "taken")
	gitT(t, remote, "branch", "taken", "main")
	cases := []struct {
		name string
		ws   Workspace
		want error
		msg  string
	}{
		{"local repo not a git repository", Workspace{Repo: t.TempDir(), Branch: "b"}, ErrNotRepo, "is not a git repository"},
		{"local repo missing", Workspace{Repo: filepath.Join(t.TempDir(), "nope"), Branch: "b"}, ErrNotRepo, "does not exist"},
		{"cloud repo not a git repository", Workspace{Repo: t.TempDir(), Cloud: true, Branch: "b"}, ErrNotRepo, "is not a git repository"},
		{"unknown base", Workspace{Repo: repo, Base: "v9.9", Branch: "b"}, ErrUnknownRev, `base "v9.9"`},
		{"local branch exists", Workspace{Repo: repo, Branch: "taken"}, ErrBranchExists, `branch "taken" exists`},
		{"remote branch exists", Workspace{Repo: remote, Cloud: true, Branch: "taken"}, ErrBranchExists, `branch "taken" exists`},
		{"dot dot", Workspace{Repo: repo, Branch: "nerve/a..b"}, ErrBadBranch, "not valid"},
		{"space", Workspace{Repo: repo, Branch: "my branch"}, ErrBadBranch, "not valid"},
		{"dash", Workspace{Repo: repo, Branch: "-f"}, ErrBadBranch, "not valid"},
		{"lock", Workspace{Repo: repo, Branch: "x.lock"}, ErrBadBranch, "not valid"},
		{"at", Workspace{Repo: repo, Branch: "@{-1}"}, ErrBadBranch, "not valid"},
		{"empty", Workspace{Repo: repo}, ErrBadBranch, "not valid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Start(bg, c.ws)
			e := wantErr(t, err, c.want, KindWorkspace)
			if !strings.Contains(e.Msg, c.msg) {
				t.Errorf("message %q does not say %q", e.Msg, c.msg)
			}
		})
	}
	if b := gitT(t, repo, "branch", "--list"); b != "  main\n  taken" && b != "* main\n  taken" {
		t.Errorf("branches after refusals: %q", b)
	}
}

// TestNoGit: a machine without git gets ErrNoGit from every call.
func TestNoGit(t *testing.T) {
	repo := newRepo(t)
	t.Setenv("PATH", t.TempDir())
	for _, m := range []*Manager{newManager(t), {Home: t.TempDir(), Git: "/nonexistent/git"}} {
		if _, err := m.CheckGit(bg); err == nil {
			t.Error("CheckGit found git")
		}
		_, err := m.Start(bg, Workspace{Repo: repo, Branch: "b"})
		e := wantErr(t, err, ErrNoGit, KindWorkspace)
		if !strings.Contains(e.Msg, "git is not installed") {
			t.Errorf("message: %s", e.Msg)
		}
		_, err = m.Open(bg, Turn{Workspace: Workspace{Repo: repo, Branch: "b", Base: "HEAD"}, Key: "k"})
		wantErr(t, err, ErrNoGit, KindWorkspace)
	}
}

func TestCheckGit(t *testing.T) {
	v, err := newManager(t).CheckGit(bg)
	if err != nil || !strings.HasPrefix(v, "2.") {
		t.Fatalf("CheckGit = %q, %v", v, err)
	}
}

// TestCredentialsNeverInErrors: a URL with a token in it fails without
// the token in the message and without a prompt.
func TestCredentialsNeverInErrors(t *testing.T) {
	m := newManager(t)
	_, err := m.Start(bg, Workspace{Repo: "http://nerve:s3cret-token@127.0.0.1:9/repo.git", Cloud: true, Branch: "b"})
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("error %q", err)
	}
	if KindOf(err) != KindWorkspace {
		t.Errorf("kind %q", KindOf(err))
	}
	if matches, _ := filepath.Glob(filepath.Join(m.Home, "repos", "*")); len(matches) != 0 {
		t.Errorf("a failed clone left %v", matches)
	}
}

// TestAgentDeletesDotGit: the agent removes the worktree's .git file; its
// work is still committed, and the worktree is whole again.
func TestAgentDeletesDotGit(t *testing.T) {
	repo := newRepo(t)
	m := newManager(t)
	ws, err := m.Start(bg, Workspace{Repo: repo, Branch: "nerve/w/thread-1"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := m.Open(bg, Turn{Workspace: ws, Key: "w#thread-1", Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr.Dir, "work.txt"), "kept\n")
	if err := os.Remove(filepath.Join(tr.Dir, ".git")); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Finish(bg, "agent", "author, step 1: work")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, repo, "show", "nerve/w/thread-1:work.txt"); got != "kept" || res.Changes.Files != 1 {
		t.Errorf("work.txt on the branch: %q (%+v)", got, res)
	}
	// The whole worktree removed: the turn fails clearly, the branch stays,
	// and the next Open makes the worktree again.
	ws.Head = res.Commit
	tr, err = m.Open(bg, Turn{Workspace: ws, Key: "w#thread-1", Step: 2})
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(tr.Dir)
	_, err = tr.Finish(bg, "agent", "author, step 2: gone")
	wantErr(t, err, ErrWorktree, KindWorkspace)
	if got := gitT(t, repo, "rev-parse", "nerve/w/thread-1"); got != res.Commit {
		t.Errorf("branch moved to %s", got)
	}
	if tr, err = m.Open(bg, Turn{Workspace: ws, Key: "w#thread-1", Step: 2}); err != nil || read(t, filepath.Join(tr.Dir, "work.txt")) != "kept\n" {
		t.Fatalf("reopen after removal: %v", err)
	}

	// .git deleted between turns: the next Open repairs it.
	os.Remove(filepath.Join(tr.Dir, ".git"))
	tr2, err := m.Open(bg, Turn{Workspace: ws, Key: "w#thread-1", Step: 2})
	if err != nil || tr2.Dir != tr.Dir {
		t.Fatalf("reopen: %v", err)
	}
}

// TestAgentChecksOutAnotherBranch: an agent that runs `git checkout main`
// inside its worktree fails the turn clearly and moves no branch; the next
// Open puts the worktree back. One that makes its own branch from the
// turn's start keeps its work.
func TestAgentChecksOutAnotherBranch(t *testing.T) {
	repo := newRepo(t)
	m := newManager(t)
	gitT(t, repo, "checkout", "-q", "-b", "elsewhere", "HEAD~1")
	gitT(t, repo, "checkout", "-q", "main")
	ws, err := m.Start(bg, Workspace{Repo: repo, Base: "main", Branch: "nerve/w/thread-1"})
	if err != nil {
		t.Fatal(err)
	}
	turn := Turn{Workspace: ws, Key: "w#thread-1", Step: 1}
	tr, err := m.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, tr.Dir, "checkout", "-q", "elsewhere")
	write(t, filepath.Join(tr.Dir, "oops.txt"), "x\n")
	_, err = tr.Finish(bg, "agent", "author, step 1: oops")
	e := wantErr(t, err, ErrWorktree, KindWorkspace)
	if !strings.Contains(e.Msg, `branch "elsewhere"`) {
		t.Errorf("message: %s", e.Msg)
	}
	if got := gitT(t, repo, "rev-parse", ws.Branch); got != ws.Head {
		t.Errorf("branch moved to %s", got)
	}
	if got := gitT(t, repo, "rev-parse", "elsewhere"); got != gitT(t, repo, "rev-parse", "main~1") {
		t.Errorf("the agent's branch elsewhere moved to %s", got)
	}

	tr, err = m.Open(bg, turn)
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, tr.Dir, "rev-parse", "HEAD"); got != ws.Head {
		t.Errorf("reopened at %s; want %s", got, ws.Head)
	}
	if _, err := gitE(tr.Dir, "symbolic-ref", "-q", "HEAD"); err == nil {
		t.Error("reopened worktree is on a branch, not detached")
	}
	gitT(t, tr.Dir, "checkout", "-q", "-b", "agent-topic")
	write(t, filepath.Join(tr.Dir, "good.txt"), "y\n")
	gitT(t, tr.Dir, "add", ".")
	gitT(t, tr.Dir, "commit", "-q", "-m", "on my own branch")
	res, err := tr.Finish(bg, "agent", "author, step 1: good")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, repo, "log", "-1", "--format=%s", ws.Branch); got != "on my own branch" || res.Changes.Files != 1 {
		t.Errorf("branch head %q, %+v", got, res)
	}
}

// TestUserHooksAndConfigIgnored: the user's global hooks and settings do
// not run or break commits made on an agent's behalf.
func TestUserHooksAndConfigIgnored(t *testing.T) {
	remote := newRemote(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	hooks := filepath.Join(home, "hooks")
	ran := filepath.Join(home, "ran")
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "prepare-commit-msg", "pre-push", "post-checkout"} {
		write(t, filepath.Join(hooks, h), "#!/bin/sh\necho "+h+" >> "+ran+"\nexit 1\n")
		os.Chmod(filepath.Join(hooks, h), 0o755)
	}
	write(t, filepath.Join(home, ".gitconfig"), "[core]\n\thooksPath = "+hooks+
		"\n[commit]\n\tgpgSign = true\n[user]\n\tuseConfigOnly = true\n[merge]\n\tff = only\n")
	t.Setenv("GIT_AUTHOR_NAME", "Someone Else")

	m := newManager(t)
	ws, err := m.Start(bg, Workspace{Repo: remote, Cloud: true, Branch: "nerve/w/thread-1"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := m.Open(bg, Turn{Workspace: ws, Key: "w#thread-1", Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr.Dir, "x.txt"), "x\n")
	res, err := tr.Finish(bg, "agent-1", "author, step 1: x")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, remote, "log", "-1", "--format=%an <%ae>", res.Commit); got != "agent-1 <agent-1@nerve.invalid>" {
		t.Errorf("author %q", got)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("user hooks ran: %s", b)
	}
}

// A git error says git's reason: the first error line with the paths
// listed under it, not the last line, which may say nothing.
func TestGitReason(t *testing.T) {
	for stderr, want := range map[string]string{
		"error: The following untracked working tree files would be overwritten by checkout:\n\ta.txt\n\tb.txt\nPlease move or remove them before you switch branches.\nAborting\n":                  "The following untracked working tree files would be overwritten by checkout: a.txt, b.txt",
		"fatal: 'origin' does not appear to be a git repository\nfatal: Could not read from remote repository.\n\nPlease make sure you have the correct access rights\nand the repository exists.\n": "'origin' does not appear to be a git repository",
		"error: a\n\t1\n\t2\n\t3\n\t4\n\t5\n\t6\n\t7\n":     "a: 1, 2, 3, 4, 5, and 2 more",
		"remote: Repository not found.\n":                   "Repository not found.",
		"hint: try this\nsomething odd happened\nhint: x\n": "something odd happened",
	} {
		if got := reason(stderr); got != want {
			t.Errorf("reason(%q) = %q; want %q", stderr, got, want)
		}
	}
}
