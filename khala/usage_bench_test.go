package khala

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
)

// BenchmarkUsageQuery is GET /v1/usage?by=workflow over the rollup of
// 100,000 answered turns (90 days, 5 workflows, 4 roles, 8 agents, 2
// adapters, 3 models: every answer a row of its own key's sum), on each
// backend. The rows are written as answers write them (ThreadChange.Spent),
// 100 answers to a change, so filling takes seconds, not a day of turns.
func BenchmarkUsageQuery(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			ts := bk.server(b)
			fillRollup(b, ts.store, 100_000)
			a := ts.agent("a")
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				r := a.usage("?by=workflow")
				took = append(took, time.Since(start))
				if r.Total.Messages != 100_000 || len(r.Groups) != 5 {
					b.Fatalf("total %d in %d groups", r.Total.Messages, len(r.Groups))
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-p50")
		})
	}
}

func fillRollup(b *testing.B, s khaladb.Storage, answers int) {
	const perChange = 100
	u := &usage.Usage{Model: "m", InputTokens: usage.Int(1000), OutputTokens: usage.Int(50), CostUSD: usage.Float(0.002)}
	day0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	n := 0
	for n < answers {
		v := khaladbtest.StartThread(b, s, "bench", day0)
		err := s.UpdateThread(b.Context(), v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			c := &khaladb.ThreadChange{Thread: v.Thread}
			for k := range perChange {
				i := n + k
				m := *u
				m.Model = fmt.Sprintf("model-%d", i%3)
				key := usage.KeyOf(day0.AddDate(0, 0, i%90), fmt.Sprintf("wf-%d", i%5), fmt.Sprintf("role-%d", i%4),
					fmt.Sprintf("agent-%d", i%8), []string{"claude", "codex"}[i%2], &m)
				r := usage.Row{Key: key}
				r.Add(&m)
				c.Spent = append(c.Spent, r)
			}
			return c, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		n += perChange
	}
}
