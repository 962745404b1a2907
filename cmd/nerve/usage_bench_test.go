package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// BenchmarkUsageCommand times the whole `nerve usage --by model` (the real
// binary, its daemon running) over a nerve.db of 100,000 messages with
// usage: 1,000 threads of 100 over 90 days, 5 workflows, 4 roles, 3
// models. The database is written through the store, as the engine's
// commits write it (each message counted in the rollup as it is stored).
func BenchmarkUsageCommand(b *testing.B) {
	home, err := os.MkdirTemp("", "nb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(home)
	st, err := store.Open(filepath.Join(home, "nerve.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	day0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	for th := range 1000 {
		t := &workflow.Thread{Workflow: fmt.Sprintf("wf-%d", th%5), Status: workflow.StatusCompleted, CreatedAt: day0}
		if err := st.CreateThread(t); err != nil {
			b.Fatal(err)
		}
		u := workflow.Update{Thread: t}
		for step := 1; step <= 100; step++ {
			i := th*100 + step
			u.Messages = append(u.Messages, workflow.Message{Step: step, Role: fmt.Sprintf("role-%d", i%4), Agent: "laptop",
				Adapter: "codex", Content: "an answer of some length, as agents give", At: day0.AddDate(0, 0, i%90),
				Usage: &usage.Usage{Model: fmt.Sprintf("model-%d", i%3), InputTokens: usage.Int(1000), OutputTokens: usage.Int(50),
					CacheReadTokens: usage.Int(0), CostUSD: usage.Float(0.002), DurationMS: 1500}})
		}
		if err := st.Commit(u); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	env := append(os.Environ(), "NERVE_HOME="+home)
	run := func(args ...string) []byte {
		cmd := exec.Command(nerveBin(b), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("nerve %v: %v\n%s", args, err, out)
		}
		return out
	}
	run("daemon", "start")
	defer run("daemon", "stop")
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		run("usage", "--by", "model")
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50")
	b.Logf("%s", run("usage", "--by", "model"))
}
