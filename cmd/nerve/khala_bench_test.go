package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala"
)

// The Khala benchmarks run a real `nerve khala serve` process on loopback
// and drive it over HTTP, the way agents do:
//
//	go test ./cmd/nerve -run '^$' -bench Khala
//
// BenchmarkKhalaBoltCommit is the floor the others stand on: one bbolt
// write transaction (two fsyncs) on the same disk.

func BenchmarkKhalaBoltCommit(b *testing.B) {
	st, err := khala.OpenBolt(filepath.Join(b.TempDir(), "floor.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for b.Loop() {
		if _, err := khala.IssueEnrollToken(b.Context(), st, 1, 0, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/commit")
}

// One thread of 200 sequential turns answered by one agent: each turn is
// claim → response → moderator → next turn queued.
func BenchmarkKhalaSequentialTurns(b *testing.B) {
	_, agents, _ := khSetup(b, 1)
	a := agents[0]
	turns := 0
	for b.Loop() {
		a.must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 200}}, 201, nil)
		for range 200 {
			tk := khClaim(b, a, 1, "5s")
			a.must(b, "POST", "/v1/turns/"+tk[0].Turn+"/response", map[string]any{"claim": tk[0].Claim, "content": "ok"}, 200, nil)
			turns++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns)/1000, "ms/turn")
}

// Eight agents share 1,000 threads of 4 turns each. With capacity 1 an
// agent claims one turn and answers it before claiming again; with
// capacity 4 it claims up to four at once and answers them in parallel,
// as a daemon with max_concurrent_turns: 4 does.
func BenchmarkKhalaThroughput(b *testing.B) {
	for _, capacity := range []int{1, 4} {
		b.Run(fmt.Sprintf("capacity=%d", capacity), func(b *testing.B) { khThroughput(b, capacity) })
	}
}

func khThroughput(b *testing.B, capacity int) {
	_, agents, _ := khSetup(b, 8)
	var turns, creating time.Duration
	total := 0
	for b.Loop() {
		b.StopTimer()
		start := time.Now()
		khParallel(8, 1000, func(w, i int) {
			agents[w].must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 4}}, 201, nil)
		})
		creating += time.Since(start)
		b.StartTimer()
		start = time.Now()
		var answered atomic.Int64
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for answered.Load() < 4000 {
					var rw sync.WaitGroup
					for _, tk := range khClaim(b, a, capacity, "100ms") {
						rw.Add(1)
						go func() {
							defer rw.Done()
							a.must(b, "POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "ok"}, 200, nil)
							answered.Add(1)
						}()
					}
					rw.Wait()
				}
			}()
		}
		wg.Wait()
		turns += time.Since(start)
		total += 4000
	}
	b.ReportMetric(float64(total)/turns.Seconds(), "turns/s")
	b.ReportMetric(float64(b.N*1000)/creating.Seconds(), "threads-created/s")
}

// 10,000 open threads with one queued turn each: how long a claim takes,
// and the server's memory.
func BenchmarkKhalaClaim10kOpenThreads(b *testing.B) {
	p, agents, _ := khSetup(b, 8)
	khParallel(8, 10000, func(w, i int) {
		agents[w].must(b, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 1}}, 201, nil)
	})
	rssLoaded := khRSS(b, p.cmd.Process.Pid, "VmRSS")
	// A claim whose filter matches nothing walks the whole queue: the worst case.
	var miss []time.Duration
	for range 50 {
		start := time.Now()
		if got := khClaimFiltered(b, agents[0], "nobody"); len(got) != 0 {
			b.Fatal("a filter matching nothing got a turn")
		}
		miss = append(miss, time.Since(start))
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if got := khClaim(b, agents[0], 1, "0s"); len(got) != 1 {
			b.Fatal("queue drained: run with a smaller -benchtime")
		}
		lat = append(lat, time.Since(start))
	}
	b.ReportMetric(khPct(lat, 50), "p50-ms")
	b.ReportMetric(khPct(lat, 95), "p95-ms")
	b.ReportMetric(khPct(lat, 99), "p99-ms")
	b.ReportMetric(khPct(miss, 95), "p95-full-scan-ms")
	b.ReportMetric(rssLoaded, "rss-MiB")
	b.ReportMetric(khRSS(b, p.cmd.Process.Pid, "VmHWM"), "peak-rss-MiB")
}

// An idle server's memory.
func BenchmarkKhalaIdleRSS(b *testing.B) {
	home := b.TempDir()
	p := khStart(b, home, filepath.Join(home, "khala.db"))
	time.Sleep(2 * time.Second)
	for b.Loop() {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(khRSS(b, p.cmd.Process.Pid, "VmRSS"), "rss-MiB")
}

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
