package store

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

func spent(step int, role, agent, adapter, model string, at time.Time, tokens int64, cost *float64) workflow.Message {
	return workflow.Message{Step: step, Role: role, Agent: agent, Adapter: adapter, At: at,
		Usage: &usage.Usage{Model: model, InputTokens: usage.Int(tokens), OutputTokens: usage.Int(1), CostUSD: cost}}
}

func TestUsageRollupByEveryDimension(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nerve.db")
	st, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	day1 := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Hour)
	a := &workflow.Thread{Workflow: "review", Status: workflow.StatusRunning}
	b := &workflow.Thread{Workflow: "fix", Status: workflow.StatusRunning}
	for _, th := range []*workflow.Thread{a, b} {
		if err := st.CreateThread(th); err != nil {
			t.Fatal(err)
		}
	}
	m1 := spent(1, "author", "laptop", "claude", "opus", day1, 100, usage.Float(0.5))
	m2 := spent(2, "reviewer", "laptop", "codex", "gpt", day2, 200, nil)
	m3 := spent(1, "author", "ci", "claude", "opus", day2, 300, usage.Float(1.5))
	noUsage := workflow.Message{Step: 3, Role: "author", At: day2}
	for _, u := range []workflow.Update{
		{Thread: a, Messages: []workflow.Message{m1}},
		{Thread: a, Messages: []workflow.Message{m1, m2, noUsage}}, // m1 again: counted once
		{Thread: b, Messages: []workflow.Message{m3}},
	} {
		if err := st.Commit(u); err != nil {
			t.Fatal(err)
		}
	}
	check := func(st *Store, by string, f usage.Filter, want map[string]int64) {
		t.Helper()
		rows, err := st.Usage(f)
		if err != nil {
			t.Fatal(err)
		}
		r := usage.Build(rows, by, f)
		got := map[string]int64{}
		for _, g := range r.Groups {
			got[g.Key] = g.InputTokens
		}
		if len(got) != len(want) {
			t.Fatalf("by %s %+v: %v, want %v", by, f, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("by %s %+v: %v, want %v", by, f, got, want)
			}
		}
	}
	check(st, "workflow", usage.Filter{}, map[string]int64{"review": 300, "fix": 300})
	check(st, "role", usage.Filter{}, map[string]int64{"author": 400, "reviewer": 200})
	check(st, "agent", usage.Filter{}, map[string]int64{"laptop": 300, "ci": 300})
	check(st, "adapter", usage.Filter{}, map[string]int64{"claude": 400, "codex": 200})
	check(st, "model", usage.Filter{}, map[string]int64{"opus": 400, "gpt": 200})
	check(st, "day", usage.Filter{}, map[string]int64{"2026-03-01": 100, "2026-03-02": 500})
	check(st, "model", usage.Filter{Since: "2026-03-02"}, map[string]int64{"opus": 300, "gpt": 200})
	check(st, "role", usage.Filter{Workflow: "review"}, map[string]int64{"author": 100, "reviewer": 200})

	rows, _ := st.Usage(usage.Filter{})
	tot := usage.Build(rows, "model", usage.Filter{}).Total
	if tot.Messages != 3 || tot.Unpriced != 1 || *tot.CostUSD != 2 {
		t.Fatalf("total %+v", tot)
	}

	// A nerve.db from before the rollup gets it from its messages.
	if err := st.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketUsage) }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check(st, "workflow", usage.Filter{}, map[string]int64{"review": 300, "fix": 300})
	check(st, "day", usage.Filter{}, map[string]int64{"2026-03-01": 100, "2026-03-02": 500})
}
