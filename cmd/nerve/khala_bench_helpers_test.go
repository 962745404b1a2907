package main

// Helpers of the Khala load benchmarks: claims, a bounded parallel loop,
// percentiles and a process's memory.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func khClaim(tb testing.TB, a *khClient, max int, wait string) []khTurn {
	tb.Helper()
	var out []khTurn
	a.must(tb, "POST", "/v1/turns/claim", map[string]any{"max": max, "wait": wait}, 200, &out)
	return out
}

func khClaimFiltered(tb testing.TB, a *khClient, role string) []khTurn {
	tb.Helper()
	var out []khTurn
	a.must(tb, "POST", "/v1/turns/claim", map[string]any{"roles": []string{role}}, 200, &out)
	return out
}

// parallel runs n calls of fn spread over workers.
func khParallel(workers, n int, fn func(worker, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(w, i)
			}
		}()
	}
	wg.Wait()
}

func khPct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)*p/100, len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

// rssMiB reads a memory figure of a process from /proc.
func khRSS(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
