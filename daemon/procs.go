package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// Adapter process groups are recorded in $NERVE_HOME/procs while they run
// (procslots.go), so a daemon restarted after a crash can kill what the
// dead one left behind.

func (r *runner) procKey(thread string, step int) string {
	return fmt.Sprintf("%s-%d", thread, step)
}

// RecordProc notes a running adapter's group with its start time, so a
// recycled pid is never mistaken for it. It runs just after the fork.
func (r *runner) RecordProc(thread string, step, pid int) {
	r.recordGroup(pid, fmt.Sprintf("%s step %d", thread, step))
	start, err := bootTicks()
	if err != nil {
		return
	}
	r.procs.record(r.procKey(thread, step), pid, strconv.FormatInt(start, 10))
}

// ForgetProc removes a record once its adapter has ended, and has what
// left its group swept up: at once, and again shortly after (reaper.go).
func (r *runner) ForgetProc(thread string, step int) {
	r.forgetGroup(fmt.Sprintf("%s step %d", thread, step))
	r.procs.forget(r.procKey(thread, step))
	r.kickSweep()
}

// killStaleProcs kills every adapter group a previous daemon recorded and
// did not see end: the lines of the slots file, and the one-file-per-turn
// records of daemons before it.
func (r *runner) killStaleProcs() {
	dir := filepath.Join(r.d.paths.Home, "procs")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		os.Remove(path)
		if err != nil {
			continue
		}
		records := []string{string(b)}
		if e.Name() == procSlotsName {
			records = strings.Split(string(b), "\n")
		}
		for _, rec := range records {
			r.killStale(rec, e.Name())
		}
	}
}

// killStale kills the group of one record "PID START [KEY]" if its leader
// still runs; a blank or torn record is skipped.
func (r *runner) killStale(record, name string) {
	var pid int
	var start string
	if _, err := fmt.Sscan(record, &pid, &start); err != nil || pid <= 1 {
		return
	}
	if f := strings.Fields(record); len(f) > 2 {
		name = f[2]
	}
	if cur, err := procStartTime(pid); err == nil && sameStart(cur, start) {
		r.d.log.Warn("killing an adapter left from before a crash", "pid", pid, "turn", name)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// A process's start time is field 22 of /proc/PID/stat: clock ticks
// (USER_HZ, 100 on every Linux Go runs on) of the boot clock at its fork.
// RecordProc takes it from the boot clock itself just after the fork:
// reading a new process's stat file cost as much as the rest of recording
// it. That reading is later than the kernel's by however long the daemon
// took to get there, so a record matches a start up to startSlack ticks
// before it; a pid is not handed out again within a second.
const (
	userHZ     = 100
	startSlack = userHZ // one second
)

// bootTicks is the boot clock now, in /proc's clock ticks.
func bootTicks() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, err
	}
	return ts.Nano() / (1e9 / userHZ), nil
}

// sameStart reports whether a running process that started at cur (from
// /proc) is the one recorded as started at rec (the boot clock just after
// its fork, or /proc's own figure in records of earlier daemons).
func sameStart(cur, rec string) bool {
	c, err1 := strconv.ParseInt(cur, 10, 64)
	r, err2 := strconv.ParseInt(rec, 10, 64)
	return err1 == nil && err2 == nil && c <= r && r-c <= startSlack
}

// procStartTime reads a process's start time (field 22 of /proc/PID/stat).
func procStartTime(pid int) (string, error) {
	fields, err := procstat.Fields(pid)
	if err != nil {
		return "", err
	}
	if len(fields) < 20 {
		return "", fmt.Errorf("malformed stat")
	}
	return fields[19], nil
}
