package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/workflow"
)

// These tests run real daemons (in this process) and the real git binary:
// an exec adapter's shell script plays the agent and edits files in
// $NERVE_WORKDIR.

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary")
	}
}

// gitC runs git in dir and returns its trimmed output.
func gitC(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=user", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=user", "GIT_COMMITTER_EMAIL=user@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// userRepo is a person's clone: branch main with one commit, clean.
func userRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	gitC(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o600)
	gitC(t, dir, "add", "README")
	gitC(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// checkout is what the user's clone looks like: status, branch, HEAD.
func checkout(t testing.TB, dir string) string {
	return gitC(t, dir, "status", "--porcelain") + "|" + gitC(t, dir, "symbolic-ref", "--short", "HEAD") + "|" +
		gitC(t, dir, "rev-parse", "HEAD")
}

// wsDaemon starts a daemon whose adapter "sh" runs script.
func wsDaemon(t *testing.T, script string) (*Client, config.Paths) {
	t.Helper()
	var agent string
	c, paths, _ := startDaemonWith(t, func(cfg *config.Config) {
		agent = filepath.Join(cfg.Home, "agent.sh")
		cfg.Adapters["sh"] = config.Adapter{Type: "exec", Command: []string{agent}}
	})
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"+script), 0o700); err != nil {
		t.Fatal(err)
	}
	return c, paths
}

func writeWorkflow(t testing.TB, paths config.Paths, name, src string) {
	t.Helper()
	dir := filepath.Join(paths.Home, "workflows")
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitEnded polls the thread until it ends.
func waitEnded(t testing.TB, c *Client, id string) *workflow.Thread {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		th, err := c.Thread(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if th.Ended() {
			return th
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %s did not end: %+v", id, th)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// worktreesLeft lists what is left under NERVE_HOME/worktrees once the
// daemon had a moment to remove them (it does after recording the end).
func worktreesLeft(paths config.Paths) []string {
	var out []string
	for range 100 {
		out = out[:0]
		entries, _ := os.ReadDir(filepath.Join(paths.Home, "worktrees"))
		for _, e := range entries {
			out = append(out, e.Name())
		}
		if len(out) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out
}

const noteScript = `sleep 0.2
echo "$NERVE_THREAD step $NERVE_STEP" >> "$NERVE_WORKDIR/notes.txt"
echo "noted step $NERVE_STEP in $NERVE_WORKDIR"
`

// Two local threads of one repository run at once, each on its own branch
// in its own worktree under NERVE_HOME; the user's checkout (working
// tree, index, current branch, HEAD) is never touched, and the worktrees
// go when the threads end.
func TestWorkspaceLocalThreadsInParallel(t *testing.T) {
	needGit(t)
	c, paths := wsDaemon(t, noteScript)
	repo := userRepo(t)
	before := checkout(t, repo)
	base := gitC(t, repo, "rev-parse", "HEAD")
	writeWorkflow(t, paths, "w", `workflow: w
workspace: {repo: `+repo+`}
moderator: '$count(messages) < 2 ? {"role": "dev", "instruction": "go"} : {"done": true}'
roles:
  dev: {adapter: sh, prompt: work}
`)
	ctx := context.Background()
	// One thread takes the definition's workspace, the other the run's
	// (a relative repo, against the workdir, and a branch of its own).
	var (
		wg      sync.WaitGroup
		threads [2]*workflow.Thread
		errs    [2]error
	)
	reqs := []StartRequest{
		{Workflow: "w", Workdir: t.TempDir()},
		{Workflow: "w", Workdir: filepath.Dir(repo), Workspace: &WorkspaceRequest{Repo: filepath.Base(repo), Base: "main", Branch: "feature/b"}},
	}
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			threads[i], errs[i] = c.Start(ctx, req)
		}()
	}
	wg.Wait()
	for i := range threads {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if ws := threads[i].Workspace; ws == nil || ws.Base != base || ws.Head != base || ws.Repo != repo {
			t.Fatalf("thread %d started with workspace %+v", i, ws)
		}
	}
	dirs := map[string]string{}
	for i, th := range threads {
		th = waitEnded(t, c, th.ID)
		if th.Status != workflow.StatusCompleted {
			t.Fatalf("thread %s %s: %s", th.ID, th.Status, th.Error)
		}
		ws := th.Workspace
		want := workflow.DefaultBranch("w", th.ID)
		if i == 1 {
			want = "feature/b"
		}
		if ws.Branch != want {
			t.Errorf("thread %s on branch %q; want %q", th.ID, ws.Branch, want)
		}
		if tip := gitC(t, repo, "rev-parse", "refs/heads/"+ws.Branch); tip != ws.Head || ws.Head == base {
			t.Errorf("thread %s head %s, branch at %s", th.ID, ws.Head, tip)
		}
		msgs, err := c.Messages(ctx, th.ID, workflow.Filter{})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("messages %v %v", msgs, err)
		}
		for _, m := range msgs {
			if m.Error != nil || m.Commit == "" || m.Changes == nil || m.Changes.Files != 1 || m.Changes.Insertions != 1 {
				t.Errorf("thread %s step %d: error %v, commit %q, changes %+v", th.ID, m.Step, m.Error, m.Commit, m.Changes)
			}
			dir := strings.TrimSpace(m.Content[strings.Index(m.Content, " in ")+4:])
			if !strings.HasPrefix(dir, filepath.Join(paths.Home, "worktrees")+string(filepath.Separator)) {
				t.Errorf("NERVE_WORKDIR %q is not under NERVE_HOME/worktrees", dir)
			}
			if other, ok := dirs[dir]; ok && other != th.ID {
				t.Errorf("threads %s and %s share worktree %s", other, th.ID, dir)
			}
			dirs[dir] = th.ID
		}
		if msgs[1].Commit != ws.Head {
			t.Errorf("last message's commit %s, head %s", msgs[1].Commit, ws.Head)
		}
		// Commits on the agent's behalf: its name, ROLE, step N: answer.
		log := gitC(t, repo, "log", "--reverse", "--format=%an|%s", base+".."+ws.Head)
		lines := strings.Split(log, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], msgs[0].Agent+"|dev, step 1: noted step 1 in ") ||
			!strings.HasPrefix(lines[1], msgs[1].Agent+"|dev, step 2: noted step 2 in ") {
			t.Errorf("thread %s commits:\n%s", th.ID, log)
		}
		notes := gitC(t, repo, "show", ws.Head+":notes.txt")
		ref := "w#" + th.ID
		if notes != ref+" step 1\n"+ref+" step 2" {
			t.Errorf("thread %s notes.txt:\n%s", th.ID, notes)
		}
	}
	if after := checkout(t, repo); after != before {
		t.Errorf("the user's checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	if left := worktreesLeft(paths); len(left) != 0 {
		t.Errorf("worktrees left after the threads ended: %v", left)
	}
	if wt := gitC(t, repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("git still lists worktrees:\n%s", wt)
	}
}

// A workspace that cannot be made refuses the start with a usage error
// (exit 2 in the CLI), leaves nothing behind and uses up no thread number.
func TestWorkspaceStartRefused(t *testing.T) {
	needGit(t)
	c, paths := wsDaemon(t, "echo ok\n")
	repo := userRepo(t)
	gitC(t, repo, "branch", "taken")
	writeWorkflow(t, paths, "w", `workflow: w
moderator: '{"done": true}'
roles:
  dev: {adapter: sh, prompt: work}
`)
	ctx := context.Background()
	notRepo := t.TempDir()
	for _, tc := range []struct {
		name string
		ws   WorkspaceRequest
		want string
	}{
		{"not a repository", WorkspaceRequest{Repo: notRepo}, "not a git repository"},
		{"unknown base", WorkspaceRequest{Repo: repo, Base: "no-such-rev"}, "no-such-rev"},
		{"branch exists", WorkspaceRequest{Repo: repo, Branch: "taken"}, `"taken" exists`},
		{"dots", WorkspaceRequest{Repo: repo, Branch: "a..b"}, "'..'"},
		{"space", WorkspaceRequest{Repo: repo, Branch: "a b"}, "spaces"},
		{"base an option", WorkspaceRequest{Repo: repo, Base: "--all"}, "'-'"},
	} {
		_, err := c.Start(ctx, StartRequest{Workflow: "w", Workdir: repo, Workspace: &tc.ws})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != codeUsage || ae.ExitCode() != 2 || !strings.Contains(ae.Error(), tc.want) {
			t.Errorf("%s: %v; want a usage error saying %q", tc.name, err, tc.want)
		}
	}
	if ts, _ := c.Threads(ctx, "", "", 0); len(ts) != 0 {
		t.Errorf("refused starts made threads: %v", ts)
	}
	if got := gitC(t, repo, "branch", "--format=%(refname:short)"); got != "main\ntaken" {
		t.Errorf("branches after refused starts: %q", got)
	}
	th, err := c.Start(ctx, StartRequest{Workflow: "w", Workdir: repo, Workspace: &WorkspaceRequest{}})
	if err != nil || th.ID != "thread-1" || th.Workspace == nil || th.Workspace.Branch != "nerve/w/thread-1" {
		t.Fatalf("a good start after refused ones: %+v %v", th, err)
	}
	waitEnded(t, c, th.ID)
}

// A workspace on a machine without git is refused when the thread starts.
func TestWorkspaceStartWithoutGit(t *testing.T) {
	needGit(t)
	repo := userRepo(t)
	t.Setenv("PATH", t.TempDir())
	c, paths := wsDaemon(t, "echo ok\n")
	writeWorkflow(t, paths, "w", "workflow: w\nworkspace: {}\nmoderator: '{\"done\": true}'\nroles:\n  dev: {adapter: sh, prompt: work}\n")
	_, err := c.Start(context.Background(), StartRequest{Workflow: "w", Workdir: repo})
	var ae *APIError
	if !errors.As(err, &ae) || ae.ExitCode() != 2 || !strings.Contains(ae.Error(), "git is not installed") {
		t.Fatalf("start without git: %v", err)
	}
}

// Parallel turns work in worktrees of their own off the same head and are
// merged into the branch in step order when the last answers; a conflict
// leaves the branch at the last clean merge and puts error kind merge,
// naming the files, on the message whose merge failed.
func TestWorkspaceParallelMergeAndConflict(t *testing.T) {
	needGit(t)
	c, paths := wsDaemon(t, `case "$NERVE_THREAD" in
clash*) f=same.txt ;;
*) f=$NERVE_ROLE.txt ;;
esac
echo "$NERVE_ROLE" > "$NERVE_WORKDIR/$f"
echo "wrote $f"
`)
	repo := userRepo(t)
	base := gitC(t, repo, "rev-parse", "HEAD")
	for _, name := range []string{"split", "clash"} {
		writeWorkflow(t, paths, name, `workflow: `+name+`
workspace: {}
moderator: '$count(messages) = 0 ? [{"role": "a", "instruction": "go"}, {"role": "b", "instruction": "go"}] : {"done": true}'
roles:
  a: {adapter: sh, prompt: work}
  b: {adapter: sh, prompt: work}
`)
	}
	ctx := context.Background()

	th, err := c.Start(ctx, StartRequest{Workflow: "split", Workdir: repo})
	if err != nil {
		t.Fatal(err)
	}
	th = waitEnded(t, c, th.ID)
	msgs, _ := c.Messages(ctx, th.ID, workflow.Filter{})
	if th.Status != workflow.StatusCompleted || len(msgs) != 2 {
		t.Fatalf("split: %s %s, %d messages", th.Status, th.Error, len(msgs))
	}
	for _, m := range msgs {
		if m.Error != nil || m.Commit == "" || gitC(t, repo, "rev-parse", m.Commit+"^") != base {
			t.Errorf("split step %d: error %v, commit %s not off the base", m.Step, m.Error, m.Commit)
		}
	}
	head := th.Workspace.Head
	if tip := gitC(t, repo, "rev-parse", "refs/heads/"+th.Workspace.Branch); tip != head {
		t.Errorf("branch at %s, head %s", tip, head)
	}
	if got := gitC(t, repo, "ls-tree", "--name-only", head); got != "README\na.txt\nb.txt" {
		t.Errorf("merged tree:\n%s", got)
	}
	if err := exec.Command("git", "-C", repo, "merge-base", "--is-ancestor", msgs[1].Commit, head).Run(); err != nil {
		t.Errorf("step 2's commit is not in the merged head")
	}

	th, err = c.Start(ctx, StartRequest{Workflow: "clash", Workdir: repo})
	if err != nil {
		t.Fatal(err)
	}
	th = waitEnded(t, c, th.ID)
	msgs, _ = c.Messages(ctx, th.ID, workflow.Filter{})
	if len(msgs) != 2 || msgs[0].Error != nil {
		t.Fatalf("clash: %d messages, first %+v", len(msgs), msgs)
	}
	if e := msgs[1].Error; e == nil || e.Kind != workflow.ErrorKindMerge || !strings.Contains(e.Message, "same.txt") {
		t.Fatalf("clash step 2 error %+v; want kind merge naming same.txt", e)
	}
	head = th.Workspace.Head
	if got := gitC(t, repo, "show", head+":same.txt"); got != "a" {
		t.Errorf("branch after the conflict has same.txt %q; want step 1's", got)
	}
	if tip := gitC(t, repo, "rev-parse", "refs/heads/"+th.Workspace.Branch); tip != head {
		t.Errorf("branch at %s, head %s", tip, head)
	}
	if left := worktreesLeft(paths); len(left) != 0 {
		t.Errorf("worktrees left after the threads ended: %v", left)
	}
	if st := gitC(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("user's checkout changed: %s", st)
	}
}
