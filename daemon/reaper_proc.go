package daemon

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

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
