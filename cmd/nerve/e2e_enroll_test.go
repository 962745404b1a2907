package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A name the remote already has is no dead end: the refused enrollment
// writes nothing, and the re-run with the --name the hint asks for enrolls,
// whether or not a nerve.yaml was there before.
func TestE2EEnrollTakenNameThenAnother(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 5)
	newEnv(t).must(0, "init", "--name", "box-1", "--remote", "origin="+k.url, "--enroll-token", tok)
	refused := "nerve: remote origin already has an agent called box-1\nhint: pick another name with --name\n"

	// A fresh NERVE_HOME: the refusal leaves it absent.
	e := newEnv(t)
	home := filepath.Join(e.home, "home")
	e.extra = append(e.extra, "NERVE_HOME="+home)
	if r := e.must(1, "init", "--name", "box-1", "--remote", "origin="+k.url, "--enroll-token", tok); r.stderr != refused || r.stdout != "" {
		t.Fatalf("want stderr %q, got %s", refused, r)
	}
	if _, err := os.Stat(home); err == nil {
		t.Fatalf("a refused enrollment created %s", home)
	}
	r := e.must(0, "init", "--name", "box-2", "--remote", "origin="+k.url, "--enroll-token", tok)
	if !strings.Contains(r.stdout, "✓ NERVE_HOME") || !strings.Contains(r.stdout, "created "+home) || !strings.Contains(r.stdout, "accepts this agent as box-2") {
		t.Fatalf("init --name box-2: %s", r)
	}

	// A nerve.yaml from an earlier init: --name renames its agent while it
	// is enrolled nowhere, keeping the file's comments.
	e = newEnv(t)
	e.must(0, "init", "--name", "box-1")
	if r := e.must(1, "init", "--remote", "origin="+k.url, "--enroll-token", tok); r.stderr != refused {
		t.Fatalf("want stderr %q, got %s", refused, r)
	}
	cfg, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml"))
	if strings.Contains(string(cfg), "remotes:\n  origin") {
		t.Fatalf("a refused enrollment added the remote:\n%s", cfg)
	}
	r = e.must(0, "init", "--name", "box-3", "--remote", "origin="+k.url, "--enroll-token", tok)
	if r.stderr != "" || !strings.Contains(r.stdout, "agent.name set to box-3 in "+filepath.Join(e.home, "nerve.yaml")) ||
		!strings.Contains(r.stdout, "accepts this agent as box-3") {
		t.Fatalf("init --name box-3 with a nerve.yaml: %s", r)
	}
	cfg, _ = os.ReadFile(filepath.Join(e.home, "nerve.yaml"))
	if !strings.Contains(string(cfg), "name: box-3 # how this agent appears in traces") {
		t.Fatalf("nerve.yaml:\n%s", cfg)
	}

	// Enrolled now: another --name is not used, and says so.
	r = e.must(0, "init", "--name", "box-4", "--remote", "origin="+k.url, "--enroll-token", tok)
	want := "--name box-4 not used: " + filepath.Join(e.home, "nerve.yaml") + " names this agent box-3 and was left as it is; edit agent.name there to rename it\n"
	if r.stderr != want || !strings.Contains(r.stdout, "already enrolled as box-3") {
		t.Fatalf("want stderr %q, got %s", want, r)
	}
}
