package daemon

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// reaperRunner is a runner with no daemon behind it, this test process
// being the subreaper its daemon would be.
func reaperRunner(t *testing.T) *runner {
	t.Helper()
	if err := becomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	return &runner{d: &Daemon{log: slog.New(slog.DiscardHandler)}, groups: map[int]string{}}
}

// startTurn starts script as a turn's leader does (its own session) and
// records its group as running.
func startTurn(t *testing.T, r *runner, script string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", script}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.recordGroup(cmd.Process.Pid, "w#thread-1 step 1")
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // not reaped: the group is still its
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	return cmd
}

// escape starts script the way an agent escapes its turn: in a session
// of its own, from a parent that exits at once, so it is handed to this
// process. It returns the escaped process's pid once it is.
func escape(t *testing.T, script string) int {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pid")
	double := exec.Command("sh", "-c", `setsid sh -c 'echo $$ >"$0"; `+script+`' "$0" </dev/null >/dev/null 2>&1 &`, pidfile)
	if err := double.Run(); err != nil {
		t.Fatal(err)
	}
	pid := orphan(t, pidfile)
	t.Cleanup(func() {
		if parentPID(pid) == os.Getpid() { // still ours: no other process has its pid
			syscall.Kill(pid, syscall.SIGKILL)
			reap([]int{pid}, time.Now().Add(5*time.Second))
		}
	})
	return pid
}

// gone: no such process, not even a zombie.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// orphan reads the pid a process wrote to file, once it is this
// process's child: its parent exited, and this process is its subreaper.
func orphan(t *testing.T, file string) int {
	t.Helper()
	var pid int
	waitUntil(t, "an orphan in "+filepath.Base(file), func() bool {
		b, _ := os.ReadFile(file)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0 && parentPID(pid) == os.Getpid()
	})
	return pid
}

func zombie(pid int) bool {
	f, err := procstat.Fields(pid)
	return err == nil && f[0] == "Z"
}

// A sweep kills and reaps what escaped its turn and outlived its parent,
// and reaps what exited on its own; it leaves a running turn (its leader,
// and a live process of its group handed to the daemon) and the daemon's
// own helpers (its process group), whose exit statuses os/exec still
// gets.
func TestSweepEndsWhatOutlivedItsTurn(t *testing.T) {
	r := reaperRunner(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	os.WriteFile(release, nil, 0o600)
	wait := `while [ -e "` + release + `" ]; do sleep 0.01; done`
	turn := startTurn(t, r, `sh -c 'sleep 30 & echo $! >"$0"; (`+wait+`) & echo $! >"$1"' "$0" "$1"; exec sleep 30`,
		filepath.Join(dir, "member"), filepath.Join(dir, "exited-member"))
	helper := exec.Command("sleep", "30")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if helper.ProcessState == nil {
			helper.Process.Kill()
			helper.Wait()
		}
	})
	member, exitedMember := orphan(t, filepath.Join(dir, "member")), orphan(t, filepath.Join(dir, "exited-member"))
	escaped, exited := escape(t, "sleep 30"), escape(t, wait)
	os.Remove(release)
	waitUntil(t, "zombies", func() bool { return zombie(exited) && zombie(exitedMember) })

	r.sweep()
	for name, pid := range map[string]int{"escaped": escaped, "exited": exited, "turn's exited member": exitedMember} {
		if !gone(pid) {
			t.Errorf("the %s process is left", name)
		}
	}
	for name, pid := range map[string]int{"turn": turn.Process.Pid, "turn's member": member, "helper": helper.Process.Pid} {
		if procstat.Exited(pid) {
			t.Errorf("the %s was ended", name)
		}
	}

	helper.Process.Kill()
	if err := helper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the helper's exit status: %v", err)
	}
	syscall.Kill(-turn.Process.Pid, syscall.SIGKILL)
	if err := turn.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the turn's exit status: %v", err)
	}
	r.forgetGroup("w#thread-1 step 1")
	r.sweep() // the ended turn's member, killed with its group, is reaped
	if !gone(member) {
		t.Error("the ended turn's member is left")
	}
}

// An answer from a process the daemon's turns started is refused, even
// from one that left its turn's group and outlived its parent; one from
// outside (the daemon's own parent, a client in its own process) is not,
// and one whose sender is gone cannot be judged.
func TestRefusal(t *testing.T) {
	r := reaperRunner(t)
	for _, pid := range []int{os.Getpid(), os.Getppid()} {
		if msg := r.refusal(pid); msg != "" {
			t.Errorf("pid %d: %s", pid, msg)
		}
	}
	turn := startTurn(t, r, "sleep 30")
	if msg := r.refusal(turn.Process.Pid); !strings.Contains(msg, "inside a running turn (w#thread-1 step 1") {
		t.Errorf("a turn's leader: %q", msg)
	}
	escaped := escape(t, "sleep 30")
	if msg := r.refusal(escaped); !strings.Contains(msg, "a process a turn started") || !strings.Contains(msg, "never approves its own work") {
		t.Errorf("an escaped process: %q", msg)
	}
	done := exec.Command("true")
	done.Run()
	if msg := r.refusal(done.Process.Pid); !strings.Contains(msg, "cannot tell") {
		t.Errorf("a sender that is gone: %q", msg)
	}
}
