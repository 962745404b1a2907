package procstat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Fields returns the fields of /proc/PID/stat after the command name
// (field 3, the state, first): the name may hold spaces and parentheses,
// so the fields resume after its last ')'.
func Fields(pid int) ([]string, error) {
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

// CPU is the user and system time process pid has used (fields 14 and
// 15, in clock ticks of 10 ms as Linux counts them for /proc).
func CPU(pid int) (time.Duration, error) {
	f, err := Fields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// Started is when process pid started, in clock ticks since boot (field
// 22): comparable between processes, not a wall time.
func Started(pid int) (int64, error) {
	f, err := Fields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed stat")
	}
	return strconv.ParseInt(f[19], 10, 64)
}

// Exited reports whether process pid is gone: no such process, or one
// that has exited and waits for its parent to reap it (a zombie). A
// process whose parent is init (a daemon in its own session), and an init
// that reaps late or never (a container's shell or sleep as PID 1), would
// otherwise keep a wait for its exit going long after it is done.
func Exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	fields, err := Fields(pid)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}
