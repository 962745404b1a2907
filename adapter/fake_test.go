package adapter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nerve-agents/nerve/internal/procstat"
	"github.com/nerve-agents/nerve/internal/testhome"
)

// The test binary doubles as every fake agent CLI: a symlink named
// claude, codex, … points at it, and FAKE_CLI_MODE (set through the
// adapter's env in nerve.yaml terms) says what to do. This exercises the
// real process handling (groups, pipes, signals) with no real CLI.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FAKE_CLI_MODE"); mode != "" {
		os.Exit(fakeCLI(mode))
	}
	// Short grace periods keep the kill tests quick; the tests assert
	// what happened, never how fast.
	killGrace = 500 * time.Millisecond
	pipeDrain = 500 * time.Millisecond
	testhome.Main(m)
}

// fakeDump is what a fake CLI reports about how it was started.
type fakeDump struct {
	Argv0      string            `json:"argv0"`
	Args       []string          `json:"args"`
	Dir        string            `json:"dir"`
	StdinBytes int               `json:"stdin_bytes"`
	Stdin      string            `json:"stdin"`
	Env        map[string]string `json:"env"`
	Pgid       int               `json:"pgid"`
	Sid        int               `json:"sid"`
	Pid        int               `json:"pid"`
}

func fakeCLI(mode string) int {
	if os.Getenv("FAKE_CLI_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == "sleep" {
		time.Sleep(time.Hour)
		return 0
	}
	// Read stdin first, like codex does: /dev/null gives EOF at once.
	in, _ := io.ReadAll(os.Stdin)
	if p := os.Getenv("FAKE_CLI_DUMP"); p != "" {
		wd, _ := os.Getwd()
		d := fakeDump{Argv0: os.Args[0], Args: os.Args[1:], Dir: wd, StdinBytes: len(in), Stdin: string(in),
			Env: map[string]string{}, Pid: os.Getpid(), Pgid: syscall.Getpgrp()}
		d.Sid, _ = unix.Getsid(0)
		for _, kv := range os.Environ() {
			if k, v, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "FAKE_CLI_") {
				d.Env[k] = v
			}
		}
		b, _ := json.Marshal(d)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer w.Flush()
	switch mode {
	case "replay":
	case "echo":
		fmt.Fprintf(w, "stdin bytes: %d\n%s", len(in), in)
	case "hang", "escape":
		// A grandchild in the group (or, for escape, one that left it)
		// holding stdout open, its pid written for the test to check.
		exe, err := os.Executable()
		if err != nil {
			return 3
		}
		child := exec.Command(exe)
		child.Env = append(os.Environ(), "FAKE_CLI_MODE=sleep")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if mode == "escape" {
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		pids := fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)
		if err := os.WriteFile(os.Getenv("FAKE_CLI_PIDFILE"), []byte(pids), 0o600); err != nil {
			return 3
		}
	case "flood":
		n, _ := strconv.Atoi(os.Getenv("FAKE_CLI_FLOOD_BYTES"))
		line := []byte(strings.Repeat("x", 1023) + "\n")
		if os.Getenv("FAKE_CLI_FLOOD_ONE_LINE") == "1" {
			line = line[:1023]
		}
		for written := 0; written < n; written += len(line) {
			w.Write(line)
		}
		w.WriteString("\n")
	default:
		fmt.Fprintln(os.Stderr, "fake cli: unknown mode", mode)
		return 2
	}
	if f := os.Getenv("FAKE_CLI_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		w.Write(b)
	}
	if s := os.Getenv("FAKE_CLI_STDERR"); s != "" {
		fmt.Fprint(os.Stderr, s)
	}
	if mode == "hang" {
		w.Flush()
		time.Sleep(time.Hour)
	}
	code, _ := strconv.Atoi(os.Getenv("FAKE_CLI_EXIT"))
	return code
}

// fakeBinary puts a fake CLI named name in a fresh directory and returns
// its path.
func fakeBinary(t *testing.T, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(exe, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// readDump reads what a fake CLI wrote about itself.
func readDump(t *testing.T, p string) fakeDump {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("fake cli wrote no dump: %v", err)
	}
	var d fakeDump
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// readPids reads the leader and grandchild pids a hang/escape fake wrote,
// and makes sure the test kills them whatever happens.
func readPids(t *testing.T, p string) (leader, grandchild int) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("fake cli wrote no pids: %v", err)
	}
	if _, err := fmt.Sscanf(string(b), "%d %d", &leader, &grandchild); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(leader, syscall.SIGKILL)
		syscall.Kill(grandchild, syscall.SIGKILL)
	})
	return leader, grandchild
}

// alive reports whether pid is a running process (a zombie waiting to be
// reaped by init counts as gone).
func alive(pid int) bool { return !procstat.Exited(pid) }

// waitGone waits (generously: it asserts an outcome, not a speed) for pid
// to be gone.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still alive after the turn ended", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
