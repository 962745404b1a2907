package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nerve-agents/nerve/config"
)

// Spawn starts `nerve daemon` in the background for home, detached from
// the caller's session with its output going to nerve.log, and waits until
// it answers on its socket. It returns the daemon's pid.
func Spawn(ctx context.Context, exe string, home string, extraArgs ...string) (int, error) {
	paths := config.Paths{Home: home}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return 0, fmt.Errorf("create NERVE_HOME %s: %w", home, err)
	}
	logf, err := os.OpenFile(paths.Log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	start, _ := logf.Seek(0, 2)
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	cmd := exec.Command(exe, append([]string{"daemon"}, extraArgs...)...)
	cmd.Env = append(os.Environ(), "NERVE_HOME="+home)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	c := NewClient(paths.Socket())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.Ping(ctx); err == nil {
			return cmd.Process.Pid, nil
		}
		select {
		case err := <-exited:
			// Another CLI may have started one at the same moment: ours
			// lost the lock and exited, and theirs serves.
			if st, serr := c.Status(ctx); serr == nil {
				return st.PID, nil
			}
			return 0, startError(err, paths.Log(), start)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, errors.New("daemon did not answer within 10s; see " + paths.Log())
}

// StartError is a daemon that exited before it answered: its own
// message and hint, from the lines it wrote to its log, and whether it
// refused its configuration (its exit status 2, the CLI's for usage and
// configuration errors), which the CLI that started it passes on.
type StartError struct {
	message, hint string
	status        int
}

func (e *StartError) Error() string { return "the nerve daemon could not start: " + e.message }
func (e *StartError) Hint() string  { return e.hint }

// ExitCode is 2 for a configuration the daemon refused, else 1.
func (e *StartError) ExitCode() int {
	if e.status == 2 {
		return 2
	}
	return 1
}

func startError(waitErr error, log string, offset int64) *StartError {
	e := &StartError{status: -1}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		e.status = ee.ExitCode()
	}
	e.message, e.hint = logTail(log, offset)
	if e.message == "" {
		e.message = fmt.Sprintf("it exited (%v) and wrote nothing to its log", waitErr)
	}
	return e
}

// logTail returns the last error the daemon wrote to its log after
// offset (as the CLI prints one: "nerve: MESSAGE", then maybe "hint:
// HINT"), or its last line.
func logTail(path string, offset int64) (msg, hint string) {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= offset {
		return "", ""
	}
	lines := strings.Split(strings.TrimSpace(string(b[offset:])), "\n")
	last := lines[len(lines)-1]
	if n := len(lines); n > 1 && strings.HasPrefix(last, "hint: ") {
		hint, last = strings.TrimPrefix(last, "hint: "), lines[n-2]
	}
	return strings.TrimPrefix(last, "nerve: "), hint
}
