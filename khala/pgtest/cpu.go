package pgtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ServerCPU is the CPU time every live postgres process on the machine
// has used: on a bench machine, the test cluster's. Benchmarks report the
// database's share of their work from it.
func ServerCPU() time.Duration {
	var d time.Duration
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "postgres" {
			d += ProcCPU(pid)
		}
	}
	return d
}

// ProcCPU reads a process's user and system time from /proc (in clock
// ticks of 10ms, as Linux counts them for /proc); 0 for a process gone.
func ProcCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which may hold spaces: ") S ppid ...".
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
