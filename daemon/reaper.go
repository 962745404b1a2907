package daemon

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/internal/procstat"
)

// The daemon is the subreaper of everything its turns start: a process
// that left its turn's group and session (setsid, a double fork) is handed
// to the daemon, not to init, when its parent exits. So every process a
// turn started stays a descendant of the daemon, which is how an answer
// from one is told (peer.go), and what outlives its turn is the daemon's
// child: after each turn and at shutdown the daemon kills and reaps its
// children that are neither a running turn's nor in its own process group
// (git and the other helpers it runs itself; a turn's processes, in their
// own session, cannot join that group).

const (
	// sweepFor bounds one sweep: a process that will not die (stuck in
	// the kernel) is left for the next one.
	sweepFor = 3 * time.Second
	// sweepEvery spaces sweeps out: a sweep costs about a tenth of a
	// short turn's own work, so a burst of turns ending is swept after
	// once per interval rather than once per turn.
	sweepEvery = 100 * time.Millisecond
)

// becomeSubreaper makes orphaned descendants the daemon's children.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// kickSweep asks for a sweep soon, without waiting for it; kicks while one
// is pending make one sweep.
func (r *runner) kickSweep() {
	select {
	case r.sweeps <- struct{}{}:
	default:
	}
}

// startSweeps sweeps in the background when kicked, at most once per
// sweepEvery, until the returned stop, which sweeps once more before it
// returns.
func (r *runner) startSweeps() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-r.sweeps:
				r.sweep()
			case <-quit:
				return
			}
			pause := time.NewTimer(sweepEvery)
			select {
			case <-pause.C:
			case <-quit:
				pause.Stop()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		r.sweep()
	}
}

// sweep kills the processes that outlived their turn and reaps them, and
// the ones that exited on their own. Killing one hands its children to
// the daemon, so it goes again until none is left.
func (r *runner) sweep() {
	deadline := time.Now().Add(sweepFor)
	own := syscall.Getpgrp()
	for time.Now().Before(deadline) {
		var strays []stray
		// Settled: a turn's leader forked just now is recorded before the
		// children are read, so it is never taken for a stray.
		adapter.Settled(func() { strays = r.strays(own) })
		if len(strays) == 0 {
			return
		}
		pids := make([]int, len(strays))
		for i, s := range strays {
			pids[i] = s.pid
			if s.zombie {
				continue
			}
			r.d.log.Warn("killing a process that outlived its turn", "pid", s.pid, "command", commandOf(s.pid))
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
			_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
		}
		reap(pids, deadline)
	}
}

// stray is a child of the daemon that belongs to no running turn.
type stray struct {
	pid, pgid int
	zombie    bool
}

// strays lists the daemon's children outside its own process group own
// and outside every running turn's group, and the ones of a running turn's
// group that have exited, but its leader. It never names a child os/exec
// waits for (a running turn's leader, a helper in the daemon's group), so
// reaping a stray takes no exit status from os/exec.
func (r *runner) strays(own int) []stray {
	r.mu.Lock()
	groups := maps.Clone(r.groups)
	r.mu.Unlock()
	var out []stray
	for _, pid := range children() {
		f, err := procstat.Fields(pid)
		if err != nil || len(f) < 3 {
			continue
		}
		pgid, err := strconv.Atoi(f[2])
		if err != nil || pgid <= 1 || pgid == own {
			continue
		}
		zombie := f[0] == "Z"
		if _, running := groups[pgid]; running && (!zombie || pid == pgid) {
			continue
		}
		out = append(out, stray{pid: pid, pgid: pgid, zombie: zombie})
	}
	return out
}

// reap waits for pids, children of the daemon it signalled or found
// exited, and reaps each, until deadline: one still running then is left
// for the next sweep. It waits for these pids only, never for any child:
// os/exec reaps its own.
func reap(pids []int, deadline time.Time) {
	for {
		left := pids[:0]
		for _, pid := range pids {
			var ws unix.WaitStatus
			got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			if got == 0 && (err == nil || errors.Is(err, unix.EINTR)) {
				left = append(left, pid)
			}
		}
		pids = left
		if len(pids) == 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// childrenFiles reports whether the kernel lists each thread's children
// (/proc/PID/task/TID/children, CONFIG_PROC_CHILDREN).
var childrenFiles = sync.OnceValue(func() bool {
	pid := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + pid + "/task/" + pid + "/children")
	return err == nil
})

// children lists the daemon's children: those of each of its threads, or,
// on a kernel that does not list them, every process whose parent it is.
func children() []int {
	self := os.Getpid()
	var out []int
	if childrenFiles() {
		dir := "/proc/" + strconv.Itoa(self) + "/task"
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread exited; its children went to another
			}
			for _, s := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(s); err == nil {
					out = append(out, pid)
				}
			}
		}
		return out
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && parentPID(pid) == self {
			out = append(out, pid)
		}
	}
	return out
}

// commandOf is a process's command name, for the log.
func commandOf(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}
