package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// ForgetProc removes a record once its adapter has ended.
func (r *runner) ForgetProc(thread string, step int) {
	r.forgetGroup(fmt.Sprintf("%s step %d", thread, step))
	r.procs.forget(r.procKey(thread, step))
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
	fields, err := procStat(pid)
	if err != nil {
		return "", err
	}
	if len(fields) < 20 {
		return "", fmt.Errorf("malformed stat")
	}
	return fields[19], nil
}

// procStat returns the fields of /proc/PID/stat after the command name
// (field 3, the state, first), which may hold spaces and parentheses.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed stat")
	}
	return strings.Fields(s[i+1:]), nil
}

// Exited reports whether process pid is gone: no such process, or one
// that has exited and waits for its parent to reap it (a zombie). A
// daemon runs in its own session, so its parent is init, and an init that
// reaps late or never (a container's shell or sleep as PID 1) would keep
// a wait for its exit going long after it is done.
func Exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	fields, err := procStat(pid)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}
