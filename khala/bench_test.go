package khala

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
)

// relayWF passes a thread from turn to turn until input.turns answers.
const relayWF = `workflow: relay
binding: cloud
moderator: '$count(messages) >= input.turns ? {"done": true} : {"role": "worker", "instruction": "step " & ($count(messages) + 1)}'
inputs:
  turns: {type: integer, default: 4}
roles:
  worker: {prompt: You relay.}
limits:
  max_steps: 100000
`

// The figures DESIGN.md asks for are measured against the real binary in
// cmd/nerve (BenchmarkKhala*); this in-process one is for profiling, on
// each backend:
//
//	go test ./khala -run '^$' -bench Sequential/postgres -cpuprofile cpu.out
func BenchmarkSequentialTurnsInProcess(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) { benchSequential(b, bk) })
	}
}

func benchSequential(b *testing.B, bk backend) { benchSequentialAnswering(b, bk, plainAnswer) }

// plainAnswer answers with content only: no usage, so no rollup row.
func plainAnswer(a *client, tk api.Turn) (int, []byte) { return a.respond(tk, "ok", nil) }

// usageAnswer answers as an agent CLI would, with its usage: the answer's
// commit adds it to the thread's totals and the usage rollup.
func usageAnswer(a *client, tk api.Turn) (int, []byte) {
	return a.do("POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "ok", "adapter": "codex",
		"usage": map[string]any{"model": "gpt-test", "input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 400,
			"cost_usd": 0.0031, "duration_ms": 2100, "session_id": "s", "tool_errors": 0}})
}

// BenchmarkUsageRollupInProcess is what keeping the usage rollup costs an
// answer: the sequential and throughput loads answered without usage (no
// rollup row) and with it, side by side in one run, on each backend.
func BenchmarkUsageRollupInProcess(b *testing.B) {
	for _, bk := range backends {
		for _, load := range []string{"sequential", "throughput"} {
			for _, u := range []string{"none", "reported"} {
				answer := plainAnswer
				if u == "reported" {
					answer = usageAnswer
				}
				b.Run(bk.name+"/"+load+"/usage="+u, func(b *testing.B) {
					if load == "sequential" {
						benchSequentialAnswering(b, bk, answer)
					} else {
						benchThroughputAnswering(b, bk, answer)
					}
				})
			}
		}
	}
}

func benchSequentialAnswering(b *testing.B, bk backend, answer func(*client, api.Turn) (int, []byte)) {
	ts := bk.server(b)
	a := ts.agent("a")
	a.putWorkflow(relayWF)
	turns := 0
	for b.Loop() {
		a.start("relay", map[string]any{"turns": 200}, "")
		for range 200 {
			tk := a.claimOne()
			if s, d := answer(a, tk); s != 200 {
				b.Fatalf("%d %s", s, d)
			}
			turns++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns)/1000, "ms/turn")
}

// BenchmarkThroughputInProcess is the throughput figure's load (8 agents,
// 1,000 threads of 4 turns, each agent answering one turn at a time) in
// one process, for profiling the server's share of it.
func BenchmarkThroughputInProcess(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) { benchThroughput(b, bk) })
	}
}

func benchThroughput(b *testing.B, bk backend) { benchThroughputAnswering(b, bk, plainAnswer) }

func benchThroughputAnswering(b *testing.B, bk backend, answer func(*client, api.Turn) (int, []byte)) {
	ts := bk.server(b)
	agents := make([]*client, 8)
	for i := range agents {
		agents[i] = ts.agent(fmt.Sprintf("a%d", i))
	}
	agents[0].putWorkflow(relayWF)
	total := 0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		for range 1000 {
			agents[0].start("relay", map[string]any{"turns": 4}, "")
		}
		b.StartTimer()
		cpu0 := processCPU()
		var answered atomic.Int64
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(func() {
				for answered.Load() < 4000 {
					for _, tk := range a.claim(map[string]any{"max": 1, "wait": "100ms"}) {
						if s, d := answer(a, tk); s != 200 {
							b.Errorf("%d %s", s, d)
							return
						}
						answered.Add(1)
					}
				}
			})
		}
		wg.Wait()
		cpu += processCPU() - cpu0
		total += 4000
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "turns/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/turn")
}

// processCPU is the CPU time this process (server and agents: one
// process) has used, user and system: steadier than wall time on a
// shared machine. A PostgreSQL server's own is not in it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
