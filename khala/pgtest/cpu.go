package pgtest

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/internal/procstat"
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
		if comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm"); strings.TrimSpace(string(comm)) == "postgres" {
			cpu, _ := procstat.CPU(pid) // 0 for one gone meanwhile
			d += cpu
		}
	}
	return d
}
