package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Adapter process groups are recorded in $NERVE_HOME/procs while they run
// (procslots.go), so a daemon restarted after a crash can kill what the
// dead one left behind.

func (r *runner) procKey(thread string, step int) string {
	return fmt.Sprintf("%s-%d", thread, step)
}

// RecordProc notes a running adapter's group with its start time, so a
// recycled pid is never mistaken for it.
func (r *runner) RecordProc(thread string, step, pid int) {
	r.recordGroup(pid, fmt.Sprintf("%s step %d", thread, step))
	start, err := procStartTime(pid)
	if err != nil {
		return
	}
	r.procs.record(r.procKey(thread, step), pid, start)
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
	if cur, err := procStartTime(pid); err == nil && cur == start {
		r.d.log.Warn("killing an adapter left from before a crash", "pid", pid, "turn", name)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// procStartTime reads a process's start time (field 22 of /proc/PID/stat).
func procStartTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; fields resume after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", fmt.Errorf("malformed stat")
	}
	return fields[19], nil
}
