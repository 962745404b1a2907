package daemon

import (
	"context"
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
	"github.com/nerve-agents/nerve/workspace"
)

// reaperRunner is a runner with no daemon behind it, this test process
// being the subreaper its daemon would be.
func reaperRunner(t *testing.T) *runner {
	t.Helper()
	if err := becomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	return &runner{d: &Daemon{log: slog.New(slog.DiscardHandler)}, groups: map[int]string{},
		active: map[string]ActiveTurn{}, idle: make(chan struct{}), sweeps: make(chan struct{}, 1)}
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
// process. It returns the escaped process's pid once it is. env, when
// given, is its whole environment (a turn's NERVE_THREAD and NERVE_STEP).
func escape(t *testing.T, script string, env ...string) int {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pid")
	double := exec.Command("sh", "-c", `setsid sh -c 'echo $$ >"$0"; `+script+`' "$0" </dev/null >/dev/null 2>&1 &`, pidfile)
	if env != nil {
		double.Env = append(env, "PATH="+os.Getenv("PATH"))
	}
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
	// escaped names a turn that has ended (one naming nothing would be
	// spared while the running turn, older than it, runs).
	escaped, exited := escape(t, "sleep 30", "NERVE_THREAD=w#thread-9", "NERVE_STEP=1"), escape(t, wait)
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

// A helper the daemon runs (git) leads a process group of its own,
// registered while it runs: a sweep spares it and what it started, even
// what was handed to the daemon meanwhile (a git-remote-https whose
// parent exited, an ssh master that left the group, which its
// environment names the helper's). Cancelling it kills its whole group,
// and the next sweep reaps what the group left with the daemon (no
// zombie is left) and kills what left the group.
func TestSweepSparesARunningHelperAndReapsItsLeftovers(t *testing.T) {
	r := reaperRunner(t)
	dir := t.TempDir()
	git := filepath.Join(dir, "git")
	childFile, detachedFile := filepath.Join(dir, "child"), filepath.Join(dir, "detached")
	script := "#!/bin/sh\nset -- " + childFile + " " + detachedFile + `
sh -c 'sleep 30 & echo $! >"$0"' "$1"
sh -c 'setsid sh -c "echo \$\$ >\"\$0\"; exec sleep 30" "$0" </dev/null >/dev/null 2>&1 &' "$2"
exec sleep 30
`
	if err := os.WriteFile(git, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := (&workspace.Manager{Home: dir, Git: git}).CheckGit(ctx)
		done <- err
	}()
	child, detached := orphan(t, childFile), orphan(t, detachedFile)
	t.Cleanup(func() {
		for _, pid := range []int{child, detached} {
			if parentPID(pid) == os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
				reap([]int{pid}, time.Now().Add(5*time.Second))
			}
		}
	})

	r.sweep()
	if procstat.Exited(child) || procstat.Exited(detached) {
		t.Fatal("a sweep ended what a running helper started")
	}
	select {
	case err := <-done:
		t.Fatalf("a sweep ended the running helper: %v", err)
	default:
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled helper: %v", err)
	}
	waitUntil(t, "the helper's child killed with its group", func() bool { return zombie(child) })
	r.sweep()
	if !gone(child) {
		t.Errorf("the helper's child is left (state %s)", stateOf(child))
	}
	if !gone(detached) {
		t.Errorf("what left the helper's group is left (state %s)", stateOf(detached))
	}
}

// A process that escaped its turn and outlived its parent is told apart
// by the turn its environment names: spared while that turn (a local
// thread's, a remote thread's) runs, killed once it has ended; one that
// names another step, an ended turn or nothing is killed at once.
func TestSweepSparesAnEscapeeWhileItsTurnRuns(t *testing.T) {
	r := reaperRunner(t)
	localTurn := ActiveTurn{Thread: "thread-1", Step: 2}
	r.setActive(localTurn, true)
	r.setActive(ActiveTurn{Thread: "origin/w#thread-7", Step: 1}, true)
	local := escape(t, "sleep 30", "NERVE_THREAD=w#thread-1", "NERVE_STEP=2")
	remote := escape(t, "sleep 30", "NERVE_THREAD=origin/w#thread-7", "NERVE_STEP=1")
	killed := map[string]int{
		"another step":      escape(t, "sleep 30", "NERVE_THREAD=w#thread-1", "NERVE_STEP=1"),
		"an ended turn":     escape(t, "sleep 30", "NERVE_THREAD=w#thread-3", "NERVE_STEP=2"),
		"a remote's thread": escape(t, "sleep 30", "NERVE_THREAD=other/w#thread-7", "NERVE_STEP=1"),
		"no turn":           escape(t, "sleep 30", "HOME=/"),
	}

	r.sweep()
	for name, pid := range killed {
		if !gone(pid) {
			t.Errorf("the escapee naming %s is left (state %s)", name, stateOf(pid))
		}
	}
	for name, pid := range map[string]int{"local": local, "remote": remote} {
		if procstat.Exited(pid) {
			t.Errorf("the escapee of the running %s turn was ended", name)
		}
	}

	r.setActive(localTurn, false)
	r.sweep()
	if !gone(local) {
		t.Errorf("the escapee of the ended turn is left (state %s)", stateOf(local))
	}
	if procstat.Exited(remote) {
		t.Error("the escapee of the turn still running was ended")
	}
}

// Sweeps come every sweepPeriod too: a process whose turn ended with no
// sweep after (it still had a parent then, or the sweep was cut short)
// is caught without another turn ending.
func TestPeriodicSweepCatchesALateEscapee(t *testing.T) {
	r := reaperRunner(t)
	defer func(p time.Duration) { sweepPeriod = p }(sweepPeriod)
	sweepPeriod = 100 * time.Millisecond
	turn := ActiveTurn{Thread: "thread-1", Step: 1}
	r.setActive(turn, true)
	stop := r.startSweeps()
	defer stop()
	late := escape(t, "sleep 30", "NERVE_THREAD=w#thread-1", "NERVE_STEP=1")
	time.Sleep(3 * sweepPeriod)
	if procstat.Exited(late) {
		t.Fatal("a periodic sweep ended the escapee of a running turn")
	}
	r.setActive(turn, false) // no kick: no turn's end is reported
	waitUntil(t, "the escapee to be killed", func() bool { return gone(late) })
}

// stateOf is a process's state letter ("Z": a zombie), "gone" when there
// is none, for a test's failure.
func stateOf(pid int) string {
	f, err := procstat.Fields(pid)
	if err != nil {
		return "gone"
	}
	return f[0]
}

// A process whose environment names nothing (ssh's ControlPersist master
// and perl's $0 overwrite what /proc/PID/environ reads) is spared while a
// turn that was running when it started still runs, since that turn may
// have started it, and killed once none does; one that started before
// every running turn is no running turn's, and is killed at once.
func TestSweepSparesAnUnnamedProcessOfARunningTurn(t *testing.T) {
	r := reaperRunner(t)
	before := escape(t, "sleep 30", "HOME=/")
	time.Sleep(50 * time.Millisecond) // a later clock tick: start times count in 10 ms ticks
	leader := startTurn(t, r, "sleep 30")
	time.Sleep(50 * time.Millisecond)
	unnamed := escape(t, "sleep 30", "HOME=/")

	r.sweep()
	if !gone(before) {
		t.Errorf("the unnamed process started before the running turn is left (state %s)", stateOf(before))
	}
	if procstat.Exited(unnamed) {
		t.Fatal("the unnamed process started during a running turn was ended while the turn runs")
	}

	r.forgetGroup("w#thread-1 step 1")
	syscall.Kill(-leader.Process.Pid, syscall.SIGKILL)
	leader.Wait()
	r.sweep()
	if !gone(unnamed) {
		t.Errorf("the unnamed process is left after its turn ended (state %s)", stateOf(unnamed))
	}
}
