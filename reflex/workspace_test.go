package reflex

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// These tests run the executor with a real workspace.Manager and the real
// git binary; the fake adapter plays the agent and edits its worktree.

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@example.com",
		"GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// sharedRemote is a bare repository on disk with one commit on main.
func sharedRemote(t *testing.T) (remote, base string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary")
	}
	seed := t.TempDir()
	gitIn(t, seed, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(seed, "README"), []byte("hi\n"), 0o600)
	gitIn(t, seed, "add", "README")
	gitIn(t, seed, "commit", "-q", "-m", "first")
	remote = filepath.Join(t.TempDir(), "shared.git")
	gitIn(t, seed, "clone", "-q", "--bare", seed, remote)
	return remote, gitIn(t, seed, "rev-parse", "HEAD")
}

// machine is one agent's executor and NERVE_HOME; edit is what its agent
// does in the worktree (nil: nothing) before it answers.
type machine struct {
	x    *Executor
	home string
	edit func(ctx context.Context, dir string) error
}

func newMachine(t *testing.T, name string) *machine {
	m := &machine{home: t.TempDir()}
	cfg := config.Defaults(m.home)
	cfg.Agent.Name = name
	cfg.Adapters["fake"] = config.Adapter{Type: "exec", Command: []string{"true"}}
	rec := newRecorder()
	m.x = NewExecutor(Deps{
		Config: func() *config.Config { return cfg }, Home: m.home,
		Snapshots: rec, Procs: rec, Tracker: rec,
		Workspaces: &workspace.Manager{Home: m.home},
		NewAdapter: func(string, config.Adapter) (adapter.Adapter, error) {
			return &fakeAdapter{run: func(ctx context.Context, req adapter.Request) (*adapter.Result, error) {
				if !slices.Contains(req.Env, "NERVE_WORKDIR="+req.Workdir) || !strings.HasPrefix(req.Workdir, m.home) {
					t.Errorf("workdir %s, env %v", req.Workdir, req.Env)
				}
				if m.edit != nil {
					if err := m.edit(ctx, req.Workdir); err != nil {
						return nil, err
					}
				}
				return &adapter.Result{Content: "did it\nmore"}, nil
			}}, nil
		},
	})
	return m
}

func appendLine(line string) func(context.Context, string) error {
	return func(_ context.Context, dir string) error {
		f, err := os.OpenFile(filepath.Join(dir, "log.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		return err
	}
}

func cloudTurn(remote string, ws *workflow.Workspace, step int) *Turn {
	return &Turn{Thread: "origin/cr#thread-1", Ref: "origin/cr#thread-1", Key: "origin--cr--thread-1", Step: step,
		Role: "author", Adapter: "fake",
		Workspace: &workspace.Turn{Workspace: workspace.Workspace{Repo: remote, Cloud: true, Base: ws.Base, Branch: ws.Branch, Head: ws.Head},
			Key: "origin--cr--thread-1", Step: step}}
}

// A cloud thread through a shared bare repository and two machines: the
// first turn creates the branch (Khala could not: it numbers the thread),
// each turn starts from the other machine's commit, and each answer
// carries the commit pushed and its changes. A turn from a head the
// remote has moved past is refused (a lease, never a force): kind
// workspace, the branch stays.
func TestTurnWorkspaceCloudTwoMachines(t *testing.T) {
	remote, base := sharedRemote(t)
	m1, m2 := newMachine(t, "agent-a"), newMachine(t, "agent-b")
	ws := &workflow.Workspace{Repo: remote, Base: base, Branch: "nerve/cr/thread-1", Head: base} // as Khala records it
	ctx := context.Background()
	var commits []string
	for i, m := range []*machine{m1, m2, m1} {
		step := i + 1
		m.edit = func(ctx context.Context, dir string) error {
			b, _ := os.ReadFile(filepath.Join(dir, "log.txt"))
			if n := strings.Count(string(b), "\n"); n != i {
				t.Errorf("step %d sees %d lines of the turns before it; want %d", step, n, i)
			}
			return appendLine("step "+string(rune('0'+step)))(ctx, dir)
		}
		a, ok := m.x.Run(ctx, cloudTurn(remote, ws, step))
		if !ok || a.Error != nil {
			t.Fatalf("step %d: %v %+v", step, ok, a.Error)
		}
		if got := gitIn(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != a.Commit {
			t.Fatalf("step %d: remote branch at %s, answer's commit %s", step, got, a.Commit)
		}
		if parent := gitIn(t, remote, "rev-parse", a.Commit+"^"); parent != ws.Head {
			t.Errorf("step %d: commit's parent %s; want the head it started from %s", step, parent, ws.Head)
		}
		if a.Changes == nil || *a.Changes != (workflow.Changes{Files: 1, Insertions: 1}) {
			t.Errorf("step %d: changes %+v", step, a.Changes)
		}
		if s := gitIn(t, remote, "log", "-1", "--format=%an|%s", a.Commit); s != []string{"agent-a", "agent-b"}[i%2]+"|author, step "+string(rune('0'+step))+": did it" {
			t.Errorf("step %d commit: %s", step, s)
		}
		commits = append(commits, a.Commit)
		ws.Head = a.Commit // Khala moves the head
	}

	// Machine 2 is handed a turn from step 2's head: the remote has moved
	// on (step 3), so its push is refused and the branch stays.
	m2.edit = appendLine("late")
	stale := *ws
	stale.Head = commits[1]
	a, ok := m2.x.Run(ctx, cloudTurn(remote, &stale, 4))
	if !ok || a.Error == nil || a.Error.Kind != workflow.ErrorKindWorkspace || !strings.Contains(a.Error.Message, "refused") || a.Commit != "" {
		t.Fatalf("stale push: ok %v, error %+v, commit %q", ok, a.Error, a.Commit)
	}
	if got := gitIn(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != commits[2] {
		t.Fatalf("remote branch moved to %s after a refused push", got)
	}

	// A turn cancelled while its agent works publishes nothing.
	cctx, cancel := context.WithCancel(ctx)
	m1.edit = func(ctx context.Context, dir string) error {
		appendLine("half")(ctx, dir)
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	if _, ok := m1.x.Run(cctx, cloudTurn(remote, ws, 4)); ok {
		t.Fatal("a cancelled turn answered")
	}
	if got := gitIn(t, remote, "rev-parse", "refs/heads/"+ws.Branch); got != commits[2] {
		t.Fatalf("remote branch moved to %s after a cancelled turn", got)
	}
	// Run again (a restart): the worktree is back at the head, without
	// the half-done line.
	m1.edit = func(ctx context.Context, dir string) error {
		b, _ := os.ReadFile(filepath.Join(dir, "log.txt"))
		if strings.Contains(string(b), "half") {
			t.Errorf("the rerun sees the cancelled turn's edit:\n%s", b)
		}
		return appendLine("step 4")(ctx, dir)
	}
	if a, ok := m1.x.Run(ctx, cloudTurn(remote, ws, 4)); !ok || a.Error != nil || a.Commit == "" {
		t.Fatalf("rerun: %v %+v", ok, a.Error)
	}
}

// A workspace the executor cannot open fails the turn with kind
// workspace before the agent runs.
func TestTurnWorkspaceOpenFails(t *testing.T) {
	remote, base := sharedRemote(t)
	m := newMachine(t, "agent-a")
	ran := false
	m.edit = func(context.Context, string) error { ran = true; return nil }
	ws := &workflow.Workspace{Repo: remote, Base: base, Branch: "nerve/cr/thread-1", Head: strings.Repeat("ab", 20)}
	a, ok := m.x.Run(context.Background(), cloudTurn(remote, ws, 2))
	if !ok || ran || a.Error == nil || a.Error.Kind != workflow.ErrorKindWorkspace {
		t.Fatalf("ok %v, agent ran %v, error %+v", ok, ran, a.Error)
	}
}
