package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// git runs the real git in dir and returns its trimmed output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepo makes a repository with one commit on main: a user's clone.
func gitRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "--quiet", "--initial-branch=main")
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# project\n"), 0o644)
	git(t, dir, "add", ".")
	git(t, dir, "commit", "--quiet", "-m", "first")
	return dir
}

// runIn runs nerve in dir (its working directory), for the commands that
// read the current directory's repository, and fails unless it exits with
// code (any code when code < 0).
func (e *env) runIn(dir string, code int, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90e9)
	defer cancel()
	cmd := exec.CommandContext(ctx, nerveBin(e.t), args...)
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	cmd.Env = append(cmd.Env, e.extra...)
	cmd.Dir = dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{out.String(), errb.String(), 0}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run nerve %v: %v", args, err)
	}
	if code >= 0 && r.code != code {
		e.t.Fatalf("nerve %s (in %s): want exit %d, got %s", strings.Join(args, " "), dir, code, r)
	}
	return r
}

// oneLineError checks that a refusal is one line saying what (and a hint
// line at most), with want in it.
func oneLineError(t *testing.T, r result, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if !strings.HasPrefix(lines[0], "nerve: ") || !strings.Contains(lines[0], want) || len(lines) > 2 ||
		(len(lines) == 2 && !strings.HasPrefix(lines[1], "hint: ")) {
		t.Fatalf("want one line with %q (and a hint at most), got:\n%s", want, r.stderr)
	}
}

const wsWorkflow = `workflow: ws
binding: local
moderator: 'last = null ? {"role": "author", "instruction": "edit"} : {"done": true}'
workspace: {}
roles:
  author: {adapter: example, prompt: p}
`

const plainWorkflow = `workflow: plain
binding: local
moderator: '{"done": true}'
roles:
  author: {adapter: example, prompt: p}
`

// Bad workspace inputs of a local run are answered by the CLI before any
// thread starts (no daemon is started), in one line, exit 2, and leave the
// user's repository as it was.
func TestE2EWorkspaceBadInputs(t *testing.T) {
	e := newEnv(t)
	e.extra = []string{"NERVE_NO_AUTOSTART=1"}
	e.write("workflows/ws.yaml", wsWorkflow)
	e.write("workflows/plain.yaml", plainWorkflow)
	repo := gitRepo(t)
	notRepo := t.TempDir()
	before := git(t, repo, "for-each-ref")

	for _, tc := range []struct {
		name string
		args []string
		dir  string
		want string
	}{
		{"not a repository", []string{"--repo", notRepo}, repo, "is not a git repository"},
		{"no such directory", []string{"--repo", filepath.Join(notRepo, "gone")}, repo, "does not exist"},
		{"relative repo not a repository", []string{"--repo", "."}, notRepo, "is not a git repository"},
		{"unknown base", []string{"--repo", repo, "--base", "nope"}, repo, `base "nope" is not a revision`},
		{"branch exists", []string{"--repo", repo, "--branch", "main"}, repo, `branch "main" exists`},
		{"branch with ..", []string{"--branch", "a..b"}, repo, `branch name "a..b" is not valid in git`},
		{"branch with a space", []string{"--branch", "has space"}, repo, `branch name "has space" is not valid in git`},
		{"workdir not a repository", []string{"--branch", "try/x"}, notRepo, "is not a git repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.runIn(tc.dir, 2, append([]string{"workflow", "run", "ws"}, tc.args...)...)
			oneLineError(t, r, tc.want)
		})
	}
	r := e.runIn(repo, 2, "workflow", "run", "plain", "--repo", repo)
	oneLineError(t, r, "workflow plain declares no workspace")

	// No git on PATH: the workspace needs it, said at once.
	noGit := t.TempDir()
	e.extra = append(e.extra, "PATH="+noGit)
	r = e.runIn(repo, 2, "workflow", "run", "ws", "--branch", "try/x")
	oneLineError(t, r, "git")
	if !strings.Contains(r.stderr, "install git") {
		t.Fatalf("no hint to install git:\n%s", r.stderr)
	}

	if e.daemonPID() != 0 {
		t.Fatal("a refused run started the daemon")
	}
	e.extra = e.extra[:1]
	if after := git(t, repo, "for-each-ref"); after != before {
		t.Fatalf("refs changed:\n%s\nwere:\n%s", after, before)
	}
	if st := git(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("user's checkout changed: %s", st)
	}
}

// A run without flags of a workflow that declares a workspace, in a
// directory that is no git repository, is refused by the daemon.
func TestE2EWorkspaceDaemonRefusesNoRepo(t *testing.T) {
	e := newEnv(t)
	e.write("workflows/ws.yaml", wsWorkflow)
	e.must(0, "daemon", "start")
	r := e.runIn(t.TempDir(), -1, "workflow", "run", "ws")
	if r.code != 2 {
		t.Fatalf("want exit 2, got %s", r)
	}
	oneLineError(t, r, "not a git repository")
}

// nerve init checks git when a configured workflow declares a workspace:
// its version when present, exit 1 when missing.
func TestE2EInitChecksGitForWorkspaces(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {name: a1}\n")
	e.write("workflows/ws.yaml", wsWorkflow)
	r := e.must(0, "init")
	if !strings.Contains(r.stdout, "git") || !strings.Contains(r.stdout, "workflow ws") {
		t.Fatalf("init names no git check:\n%s", r.stdout)
	}
	var rep struct {
		Checks []struct {
			Name, Kind, Detail, Hint string
			OK, Needed               bool
		} `json:"checks"`
	}
	noGit := t.TempDir()
	e.extra = []string{"PATH=" + noGit}
	r = e.must(1, "init", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("init --json: %v\n%s", err, r)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Kind == "git" {
			found = true
			if c.OK || !c.Needed || !strings.Contains(c.Detail, "git") || c.Hint == "" {
				t.Fatalf("git check without git: %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("no git check:\n%s", r.stdout)
	}

	// Without a workflow that declares a workspace, git is not checked.
	os.Remove(filepath.Join(e.home, "workflows", "ws.yaml"))
	e.write("workflows/plain.yaml", plainWorkflow)
	r = e.must(0, "init")
	if strings.Contains(r.stdout, "git ") {
		t.Fatalf("git checked for no workspace:\n%s", r.stdout)
	}
}

// The code-change example end to end on a local thread: the author's
// edit lands on the thread's branch, the diff shows it, checkout makes a
// branch of it, and the user's checkout is never touched.
func TestE2EWorkspaceExampleLocal(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t)
	example := repoFile(t, "examples/code-change.yaml")
	r := e.runIn(repo, 0, "workflow", "run", example, "--input", "change=Retry failed uploads", "--branch", "try/retries", "--json")
	var run struct {
		Thread    string `json:"thread"`
		Status    string `json:"status"`
		Workspace *struct{ Repo, Base, Branch, Head string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatalf("run --json: %v\n%s", err, r)
	}
	if run.Workspace == nil {
		t.Fatalf("run --json has no workspace: %s", r)
	}
	if run.Status != "completed" || run.Workspace.Branch != "try/retries" || run.Workspace.Head == run.Workspace.Base {
		t.Fatalf("run: %+v %+v", run, run.Workspace)
	}
	if st := git(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("user's checkout changed: %s", st)
	}
	if cur := git(t, repo, "branch", "--show-current"); cur != "main" {
		t.Fatalf("user's branch is %s", cur)
	}
	d := e.runIn(repo, 0, "thread", "diff", run.Thread)
	if !strings.Contains(d.stdout, "CHANGES.md") || !strings.Contains(d.stdout, "+- Retry failed uploads with exponential backoff") {
		t.Fatalf("thread diff:\n%s", d)
	}
	s := e.runIn(repo, 0, "thread", "diff", run.Thread, "--stat")
	if !strings.Contains(s.stdout, "CHANGES.md") || strings.Contains(s.stdout, "@@") {
		t.Fatalf("thread diff --stat:\n%s", s)
	}
	// An untracked CHANGES.md, which the thread adds: refused before git
	// is asked to switch, the file named.
	os.WriteFile(filepath.Join(repo, "CHANGES.md"), []byte("mine\n"), 0o644)
	refused := e.runIn(repo, 2, "thread", "checkout", run.Thread, "--branch", "review/retries")
	oneLineError(t, refused, "has uncommitted changes or untracked files (CHANGES.md)")
	os.Remove(filepath.Join(repo, "CHANGES.md"))
	e.runIn(repo, 0, "thread", "checkout", run.Thread, "--branch", "review/retries")
	if cur := git(t, repo, "branch", "--show-current"); cur != "review/retries" {
		t.Fatalf("checkout: on %s", cur)
	}
	if got := git(t, repo, "rev-parse", "HEAD"); got != run.Workspace.Head {
		t.Fatalf("checkout at %s, want %s", got, run.Workspace.Head)
	}

	// An author turn that changed nothing is refused: asked again, it edits.
	git(t, repo, "switch", "--quiet", "main")
	r = e.runIn(repo, 0, "workflow", "run", example, "--input", "change=[no edit] Retry", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || run.Status != "completed" {
		t.Fatalf("run: %v\n%s", err, r)
	}
	logs := e.runIn(repo, 0, "thread", "messages", run.Thread, "--role", "author", "--json")
	if n := strings.Count(logs.stdout, "\n"); n < 2 || !strings.Contains(logs.stdout, `"files":0`) {
		t.Fatalf("the refused turn is not in the thread:\n%s", logs.stdout)
	}
}

// nerve validate reports a definition's workspace problems with file,
// line and field.
func TestE2EValidateWorkspace(t *testing.T) {
	e := newEnv(t)
	path := e.write("workflows/ws.yaml", wsWorkflow[:strings.Index(wsWorkflow, "workspace: {}")]+
		"workspace:\n  repo: \"\"\n  base: a..b\nroles:\n  author: {adapter: example, prompt: p}\n")
	e.write("workflows/cloud.yaml", "workflow: cloud\nbinding: cloud\nmoderator: '{\"done\": true}'\nworkspace:\n  repo: ./relative\nroles:\n  author: {prompt: p}\n")
	r := e.must(2, "validate")
	for _, want := range []string{
		path + ":5: workspace.repo: is empty",
		path + ":6: workspace.base: \"a..b\" is not a git revision",
		filepath.Join(e.home, "workflows", "cloud.yaml") + ":5: workspace.repo:",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("validate: want %q in:\n%s", want, r.stdout)
		}
	}
}
