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
)

// Adapter process groups are recorded in $NERVE_HOME/procs while they run,
// one small file each, so a daemon restarted after a crash can kill what
// the dead one left behind. A record is one write(2) of a few bytes into a
// new file: a daemon killed is either before it (no record, as it would be
// before a rename) or after it (the whole record), so it costs no temp
// file and rename on every turn. An empty file (killed between the open
// and the write) does not parse and is removed. They are not fsynced:
// they only need to survive the daemon's death, not the machine's, and a
// reboot ends the processes anyway.

func (r *runner) procFile(thread string, step int) string {
	return filepath.Join(r.d.paths.Home, "procs", fmt.Sprintf("%s-%d", thread, step))
}

// RecordProc notes a running adapter's group with its start time, so a
// recycled pid is never mistaken for it.
func (r *runner) RecordProc(thread string, step, pid int) {
	r.recordGroup(pid, fmt.Sprintf("%s step %d", thread, step))
	start, err := procStartTime(pid)
	if err != nil {
		return
	}
	path := r.procFile(thread, step)
	record := []byte(fmt.Sprintf("%d %s\n", pid, start))
	if err := os.WriteFile(path, record, 0o600); errors.Is(err, fs.ErrNotExist) {
		_ = os.MkdirAll(filepath.Dir(path), 0o700) // the first turn's
		_ = os.WriteFile(path, record, 0o600)
	}
}

// ForgetProc removes a record once its adapter has ended.
func (r *runner) ForgetProc(thread string, step int) {
	r.forgetGroup(fmt.Sprintf("%s step %d", thread, step))
	_ = os.Remove(r.procFile(thread, step))
}

// killStaleProcs kills every adapter group a previous daemon recorded and
// did not see end.
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
		var pid int
		var start string
		if _, err := fmt.Sscan(string(b), &pid, &start); err != nil || pid <= 1 {
			continue
		}
		if cur, err := procStartTime(pid); err == nil && cur == start {
			r.d.log.Warn("killing an adapter left from before a crash", "pid", pid, "turn", e.Name())
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
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
