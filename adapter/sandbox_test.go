package adapter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

func needBwrap(t *testing.T) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("NERVE_REQUIRE_BWRAP") == "1" {
			t.Fatalf("NERVE_REQUIRE_BWRAP=1: %v", err)
		}
		t.Skip(err)
	}
}

// sandboxedExec is an exec adapter running script (sh) in a sandbox with
// workdir work; env is the adapter's own env from nerve.yaml.
func sandboxedExec(t *testing.T, script string, env map[string]string, timeout time.Duration) (Adapter, Request) {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o700)
	agent := filepath.Join(dir, "bin", "agent.sh")
	os.MkdirAll(filepath.Dir(agent), 0o700)
	if err := os.WriteFile(agent, []byte("#!/bin/sh\n"+script), 0o700); err != nil {
		t.Fatal(err)
	}
	a, err := New("fake", Spec{Type: "exec", Command: []string{agent}, Env: env, Timeout: yamlfile.Duration(timeout)})
	if err != nil {
		t.Fatal(err)
	}
	spec := &sandbox.Spec{Workdir: work, Home: os.Getenv("HOME"), Hide: []string{os.Getenv("NERVE_HOME")},
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + os.Getenv("HOME")}, Network: sandbox.NetNone}
	return a, Request{Prompt: "the prompt", Workdir: work, Env: []string{"NERVE_STEP=3"}, Sandbox: spec}
}

// The adapter runs its CLI in the request's sandbox: the sandbox's
// environment (not the daemon's) plus the turn's and the adapter's own
// variables, its prompt on stdin, the owner's paths from the adapter's
// env bound (a *_HOME read-write, a file read-only), nothing else of HOME.
func TestRunSandboxed(t *testing.T) {
	needBwrap(t)
	t.Setenv("PGPASSWORD", "hunter2")
	state := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "tool.json")
	os.WriteFile(cfgFile, []byte("{\"tool\":1}"), 0o600)
	secret := filepath.Join(os.Getenv("HOME"), "secret.txt")
	os.WriteFile(secret, []byte("s3cret"), 0o600)
	defer os.Remove(secret)
	a, req := sandboxedExec(t, `read p; echo "prompt $p"
echo "step $NERVE_STEP pg ${PGPASSWORD:-unset} tool $TOOL_HOME"
echo x >"$TOOL_HOME/wrote" && echo "state writable"
cat "$TOOL_CONFIG"; echo
cat `+secret+` 2>/dev/null || echo "no secret"
pwd
`, map[string]string{"TOOL_HOME": state, "TOOL_CONFIG": cfgFile}, time.Minute)
	res, err := a.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := "prompt the prompt\nstep 3 pg unset tool " + state + "\nstate writable\n{\"tool\":1}\nno secret\n" + req.Workdir
	if res.Content != want {
		t.Fatalf("content\n%s\nwant\n%s", res.Content, want)
	}
	if _, err := os.Stat(filepath.Join(state, "wrote")); err != nil {
		t.Errorf("the adapter's state dir: %v", err)
	}
}

// A sandboxed turn past its timeout is killed whole, and Run returns only
// when nothing of it runs: bwrap's pid namespace takes what it started
// (here a background sleeper) with it.
func TestRunSandboxedTimeout(t *testing.T) {
	needBwrap(t)
	old := killGrace
	killGrace = 200 * time.Millisecond
	defer func() { killGrace = old }()
	a, req := sandboxedExec(t, "cat >/dev/null\nsleep 300.3031 &\nsleep 300.3032\n", nil, time.Second)
	start := time.Now()
	_, err := a.Run(context.Background(), req)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), "300.303") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the turn outlived it", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
