package adapter

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// shellSpec is an exec adapter running a shell command, the prompt on
// its stdin.
func shellSpec(script string) Spec {
	return Spec{Type: "exec", Command: []string{"/bin/sh", "-c", script}}
}

// TestStdinWhileOutput: a child that writes what it reads while nerve is
// still writing its prompt (cat, with a prompt eight times a pipe's
// buffer) finishes: stdin is fed and stdout drained together.
func TestStdinWhileOutput(t *testing.T) {
	prompt := strings.Repeat("a line of the prompt\n", 512<<10/21)
	res, err := runFake(t, "cat", shellSpec("cat"), Request{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimRight(prompt, "\n"); res.Content != want {
		t.Errorf("content of %d bytes, want the %d-byte prompt back", len(res.Content), len(want))
	}
}

// TestUnreadStdin: a child that exits without reading its prompt (longer
// than the pipe holds) ends the turn as its exit status says; nerve does
// not wait on the unwritten rest, nor die of SIGPIPE.
func TestUnreadStdin(t *testing.T) {
	prompt := strings.Repeat("p", 1<<20)
	res, err := runFake(t, "ignorer", shellSpec("echo done"), Request{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "done" {
		t.Errorf("content %q", res.Content)
	}
	_, err = runFake(t, "failer", shellSpec("echo no >&2; exit 3"), Request{Prompt: prompt})
	if e := asError(t, err, "failer"); e.ExitStatus != 3 || !strings.Contains(e.Error(), "no") {
		t.Errorf("err %v, want exit status 3 with its stderr", err)
	}
}

// TestRunLeavesNoDescriptors: pipes, pidfd and the cancel descriptor are
// all closed after a turn, however it ended.
func TestRunLeavesNoDescriptors(t *testing.T) {
	before := openFDs(t)
	if _, err := runFake(t, "ok", shellSpec("cat; echo err >&2"), Request{Prompt: "hi"}); err != nil {
		t.Fatal(err)
	}
	slow := shellSpec("sleep 30")
	slow.Timeout = yamlfile.Duration(200 * time.Millisecond)
	if _, err := runFake(t, "slow", slow, Request{}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want a timeout", err)
	}
	a, err := New("cancelled", shellSpec("sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = a.Run(ctx, Request{Workdir: t.TempDir(), Prompt: "p", OnStart: func(int) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want cancelled", err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after the turns, %d before", after, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

// TestWatchWithoutPidfd: on a kernel that gives no pidfd, the leader's
// exit is found by asking waitid (without reaping it) as poll times out.
func TestWatchWithoutPidfd(t *testing.T) {
	p, err := newPipes(false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	pidfile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("/bin/sh", "-c", "echo out; echo err >&2; sleep 30 & echo $! > "+pidfile)
	cmd.Stdout, cmd.Stderr = p.childOut, p.childErr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.closeChildEnds()
	var out, errs []string
	w := &watch{pid: cmd.Process.Pid, pidfd: -1, pipes: p,
		out:  newLineSplitter(100, func(l []byte, _ bool) { out = append(out, string(l)) }),
		errs: newLineSplitter(100, func(l []byte, _ bool) { errs = append(errs, string(l)) }),
	}
	if err := w.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the leader was reaped before Wait, or failed: %v", err)
	}
	if strings.Join(out, "|") != "out" || strings.Join(errs, "|") != "err" {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}
	// The background sleep held the pipes; it went with the group once
	// the leader was gone.
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, pid, "the group's sleep")
}
