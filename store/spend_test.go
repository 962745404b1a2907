package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// An answer is charged to its adapter's UTC day once, in its own commit:
// stored again (a merge changed it) it is not charged again; a child's
// result or a person's answer is no adapter's spend; a remote answer is
// charged as it enters the outbox; and the figures survive a reopen.
func TestSpendChargedWithTheAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nerve.db")
	st, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	th := &workflow.Thread{Workflow: "w", Status: workflow.StatusRunning}
	if err := st.CreateThread(th); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 25, 23, 59, 0, 0, time.UTC)
	m1 := workflow.Message{Step: 1, Adapter: "claude", At: day, Usage: &usage.Usage{CostUSD: usage.Float(1.25), InputTokens: usage.Int(100), OutputTokens: usage.Int(20), CacheReadTokens: usage.Int(5000)}}
	m2 := workflow.Message{Step: 2, Adapter: "claude", At: day.Add(2 * time.Minute), Usage: &usage.Usage{CostUSD: usage.Float(0.5), InputTokens: usage.Int(10)}}
	child := workflow.Message{Step: 3, Adapter: "claude", At: day, Child: "w#thread-9", Usage: &usage.Usage{CostUSD: usage.Float(9)}}
	human := workflow.Message{Step: 4, At: day, Usage: &usage.Usage{CostUSD: usage.Float(9)}}
	for _, ms := range [][]workflow.Message{{m1}, {m1, m2, child, human}} {
		if err := st.Commit(workflow.Update{Thread: th, Messages: ms}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.Enqueue(OutboxItem{Remote: "origin", Turn: "t1", QueuedAt: day,
		Response: api.Response{Adapter: "codex", Usage: &usage.Usage{InputTokens: usage.Int(7), OutputTokens: usage.Int(3)}}})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = Open(path, time.Second); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := st.Spent("2026-11-25")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Spend{USD: 1.25, Tokens: 5120, Turns: 1}); got["claude"] != want || len(got) != 2 {
		t.Fatalf("2026-11-25: %+v, want claude %+v", got, want)
	}
	if want := (Spend{Tokens: 10, Turns: 1}); got["codex"] != want {
		t.Fatalf("codex %+v, want %+v", got["codex"], want)
	}
	next, _ := st.Spent("2026-11-26")
	if want := (Spend{USD: 0.5, Tokens: 10, Turns: 1}); next["claude"] != want || len(next) != 1 {
		t.Fatalf("2026-11-26: %+v, want claude %+v", next, want)
	}
}

// BenchmarkCommitCharge is a turn's commit with and without an answer to
// charge: what keeping the daily spend adds to the write a turn makes
// anyway.
func BenchmarkCommitCharge(b *testing.B) {
	for _, charged := range []bool{false, true} {
		name := "uncharged"
		if charged {
			name = "charged"
		}
		b.Run(name, func(b *testing.B) {
			st, err := Open(filepath.Join(b.TempDir(), "nerve.db"), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			th := &workflow.Thread{Workflow: "w", Status: workflow.StatusRunning}
			if err := st.CreateThread(th); err != nil {
				b.Fatal(err)
			}
			u := &usage.Usage{CostUSD: usage.Float(0.01), InputTokens: usage.Int(100), OutputTokens: usage.Int(10), DurationMS: 5}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := workflow.Message{Step: i + 1, Role: "w", Adapter: "claude", Content: "ok", At: time.Now(), Usage: u}
				if !charged {
					m.Adapter = ""
				}
				if err := st.Commit(workflow.Update{Thread: th, Messages: []workflow.Message{m}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
