package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/tarpit"
)

// processesNaming lists the pids whose command line contains s.
func processesNaming(s string) []string {
	var pids []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, d.Name())
		}
	}
	return pids
}

// A clone from a repository that never answers stops at the fetch
// deadline, with git's helpers (git-remote-http) killed; the turns that
// name it in the next minute fail at once instead of waiting a deadline
// each.
func TestCloneOfTarpitStopsAtDeadline(t *testing.T) {
	url := "http://" + tarpit.Listen(t) + "/repo.git"
	m := &Manager{Home: t.TempDir(), Deadlines: func() Deadlines { return Deadlines{Fetch: time.Second} }}
	ws := Workspace{Repo: url, Cloud: true, Branch: "nerve/x/thread-1"}
	start := time.Now()
	_, err := m.Start(context.Background(), ws)
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || KindOf(err) != KindWorkspace || !strings.Contains(err.Error(), "workspace.fetch_timeout") {
		t.Fatalf("Start of a tarpit: %v; want ErrTimeout naming workspace.fetch_timeout", err)
	}
	if took > 4*time.Second {
		t.Fatalf("Start of a tarpit took %s; the deadline is 1s", took)
	}
	if left := processesNaming(strings.TrimPrefix(url, "http://")); len(left) > 0 {
		t.Fatalf("git's processes outlived the deadline: pids %v", left)
	}
	start = time.Now()
	_, err = m.Start(context.Background(), ws)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "not tried again before") || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("second Start of the tarpit: %v after %s; want an immediate ErrTimeout", err, time.Since(start))
	}
	if left, _ := filepath.Glob(filepath.Join(m.Home, "repos", "*")); len(left) > 0 {
		t.Fatalf("the failed clone left %v", left)
	}
}

// An ext:: repository never runs its command, even when the user's
// gitconfig allows every protocol (and GIT_ALLOW_PROTOCOL names ext).
func TestExtRepoDoesNotRun(t *testing.T) {
	home := t.TempDir()
	write(t, filepath.Join(home, ".gitconfig"), "[protocol]\n\tallow = always\n[protocol \"ext\"]\n\tallow = always\n")
	t.Setenv("HOME", home)
	t.Setenv("GIT_ALLOW_PROTOCOL", "ext:fd:file")
	marker := filepath.Join(t.TempDir(), "pwned")
	m := &Manager{Home: t.TempDir(), Deadlines: func() Deadlines { return Deadlines{Fetch: 5 * time.Second} }}
	for _, repo := range []string{"ext::sh -c touch% " + marker, "fd::17"} {
		_, err := m.Start(context.Background(), Workspace{Repo: repo, Cloud: true, Branch: "nerve/x/thread-1"})
		if err == nil || KindOf(err) != KindWorkspace {
			t.Fatalf("Start of %q: %v; want a workspace error", repo, err)
		}
		if !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("Start of %q: %v; want git's refusal of the transport", repo, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the ext:: repository's command ran")
		}
	}
}
