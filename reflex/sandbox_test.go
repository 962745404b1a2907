package reflex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/sandbox"
)

// sandboxRun runs one turn of adapter name with cfg, bwrap working here
// or not (avail), and returns the request the adapter got (nil when it
// was not run) and the answer.
func sandboxRun(t *testing.T, cfg *config.Config, name string, avail error, svcs ...TurnService) (*adapter.Request, Answer) {
	t.Helper()
	old := sandboxAvailable
	sandboxAvailable = func() error { return avail }
	t.Cleanup(func() { sandboxAvailable = old })
	rec := newRecorder()
	var got *adapter.Request
	x := NewExecutor(Deps{
		Config: func() *config.Config { return cfg }, Executable: "/opt/nerve/bin/nerve", Home: cfg.Home,
		Snapshots: rec, Procs: rec, Tracker: rec, Scratch: rec, TurnServices: svcs,
		NewAdapter: func(string, config.Adapter) (adapter.Adapter, error) {
			return &fakeAdapter{run: func(_ context.Context, req adapter.Request) (*adapter.Result, error) {
				got = &req
				return &adapter.Result{Content: "ok"}, nil
			}}, nil
		},
	})
	a, ok := x.Run(context.Background(), &Turn{Thread: "w#thread-1", Ref: "w#thread-1", Key: "w--thread-1",
		Step: 1, Role: "author", Adapter: name, Prompt: "go", Workdir: t.TempDir()})
	if !ok {
		t.Fatal("the turn did not end")
	}
	return got, a
}

// In the default posture (auto, bwrap working) a turn gets a sandbox:
// the daemon's secrets are not in its environment, NERVE_HOME is hidden
// (still named: an empty directory inside), the CLI's state is a directory of its own under
// NERVE_HOME/sandbox, and the per-turn services' additions are there.
func TestTurnExecutorSandbox(t *testing.T) {
	t.Setenv("PGPASSWORD", "hunter2")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sekrit")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("MY_TOOL_TOKEN", "listed")
	cfg := config.Defaults(filepath.Join(t.TempDir(), "nh"))
	cfg.Sandbox.Env = []string{"MY_TOOL_TOKEN"}
	cfg.Sandbox.Read = []string{"~/.gitconfig"}
	ended := 0
	svc := func(_ context.Context, tu *Turn, name string) (sandbox.Extra, func(), error) {
		return sandbox.Extra{Env: []string{"NERVE_TURN_SOCKET=/run/nerve/turn.sock"},
			Binds: []sandbox.Bind{{Src: "/x.sock", Dst: "/run/nerve/turn.sock"}}}, func() { ended++ }, nil
	}
	req, a := sandboxRun(t, cfg, "claude", nil, svc)
	if a.Error != nil || req == nil || req.Sandbox == nil {
		t.Fatalf("no sandbox: %+v %+v", a, req)
	}
	s := req.Sandbox
	env := strings.Join(s.Env, "\n")
	for _, bad := range []string{"PGPASSWORD", "AWS_SECRET"} {
		if strings.Contains(env, bad) {
			t.Errorf("%s reaches the sandbox:\n%s", bad, env)
		}
	}
	for _, w := range []string{"LANG=C.UTF-8", "MY_TOOL_TOKEN=listed", "NERVE_THREAD=w#thread-1", "HOME=" + os.Getenv("HOME"), "NERVE_TURN_SOCKET=/run/nerve/turn.sock", "PATH=/opt/nerve/bin:"} {
		if !strings.Contains(env, w) {
			t.Errorf("missing %s in:\n%s", w, env)
		}
	}
	if !slices.Equal(s.Hide, []string{cfg.Home}) || s.Home != os.Getenv("HOME") || s.Network != sandbox.NetAllowList {
		t.Errorf("hide %q home %q network %q", s.Hide, s.Home, s.Network)
	}
	if !slices.Contains(s.Read, filepath.Join(os.Getenv("HOME"), ".gitconfig")) || !slices.Equal(s.Executables, []string{"/opt/nerve/bin/nerve"}) {
		t.Errorf("read %q executables %q", s.Read, s.Executables)
	}
	want := []sandbox.Bind{
		{Src: filepath.Join(cfg.Home, "sandbox", "claude", ".claude"), Dst: filepath.Join(os.Getenv("HOME"), ".claude"), Write: true},
		{Src: filepath.Join(cfg.Home, "sandbox", "claude", ".claude.json"), Dst: filepath.Join(os.Getenv("HOME"), ".claude.json"), Write: true},
	}
	if !slices.Equal(s.State, want) {
		t.Errorf("state %+v\nwant %+v", s.State, want)
	}
	if b, err := os.ReadFile(want[1].Src); err != nil || string(b) != "{}\n" {
		t.Errorf("claude's state file: %q %v", b, err)
	}
	if len(s.Extra.Binds) != 1 || ended != 1 {
		t.Errorf("extra %+v, services ended %d times", s.Extra, ended)
	}

	// share_state: the owner's real state paths.
	cfg.Sandbox.ShareState = true
	if req, _ := sandboxRun(t, cfg, "codex", nil); req.Sandbox == nil || req.Sandbox.State[0].Src != filepath.Join(os.Getenv("HOME"), ".codex") {
		t.Errorf("share_state: %+v", req.Sandbox)
	}
}

// Which turns get a sandbox: auto where bwrap works (else none), bwrap
// always (a turn fails where it does not work), none never; an
// adapter's own sandbox: wins over daemon.sandbox. The per-turn
// services' variables reach a turn with no sandbox too.
func TestTurnExecutorSandboxModes(t *testing.T) {
	broken := errors.New("no user namespaces")
	svc := func(context.Context, *Turn, string) (sandbox.Extra, func(), error) {
		return sandbox.Extra{Env: []string{"NERVE_TURN_SOCKET=/s"}}, nil, nil
	}
	for _, c := range []struct {
		daemon, adapter string
		avail           error
		boxed, fails    bool
	}{
		{"", "", nil, true, false},
		{"", "", broken, false, false},
		{"none", "", nil, false, false},
		{"bwrap", "", nil, true, false},
		{"bwrap", "", broken, false, true},
		{"none", "bwrap", nil, true, false},
		{"bwrap", "none", broken, false, false},
		{"auto", "", nil, true, false},
	} {
		cfg := config.Defaults(filepath.Join(t.TempDir(), "nh"))
		cfg.Daemon.Sandbox = c.daemon
		cfg.Adapters["fake"] = config.Adapter{Type: "exec", Command: []string{"true"}, Sandbox: c.adapter}
		req, a := sandboxRun(t, cfg, "fake", c.avail, svc)
		if c.fails {
			if a.Error == nil || a.Error.Kind != KindAdapter || !strings.Contains(a.Error.Message, "install bubblewrap") || req != nil {
				t.Errorf("%+v: want a failed turn, got %+v", c, a.Error)
			}
			continue
		}
		if a.Error != nil || (req.Sandbox != nil) != c.boxed {
			t.Errorf("%+v: error %+v, sandbox %v", c, a.Error, req.Sandbox != nil)
			continue
		}
		if !slices.Contains(req.Env, "NERVE_TURN_SOCKET=/s") {
			t.Errorf("%+v: the services' env is missing: %q", c, req.Env)
		}
	}
}

// A worktree's git directory is bound read-write and its repository's
// common directory read-only, so git works inside; a plain directory
// needs nothing.
func TestGitBinds(t *testing.T) {
	dir := t.TempDir()
	repo, tree := filepath.Join(dir, "repo.git"), filepath.Join(dir, "tree")
	gitdir := filepath.Join(repo, "worktrees", "tree")
	os.MkdirAll(gitdir, 0o700)
	os.MkdirAll(tree, 0o700)
	os.WriteFile(filepath.Join(tree, ".git"), []byte("gitdir: "+gitdir+"\n"), 0o600)
	os.WriteFile(filepath.Join(gitdir, "commondir"), []byte("../..\n"), 0o600)
	want := []sandbox.Bind{{Src: repo, Dst: repo}, {Src: gitdir, Dst: gitdir, Write: true}}
	if got := gitBinds(tree); !slices.Equal(got, want) {
		t.Fatalf("binds %+v\nwant %+v", got, want)
	}
	if got := gitBinds(dir); got != nil {
		t.Fatalf("a plain directory: %+v", got)
	}
}
