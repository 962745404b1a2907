package khaladbtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// BenchAnswerCommit measures what the usage rollup costs an answer's
// commit: UpdateThread writing an answer (its message, turn.answered
// event and thread record) alternately without and with its rollup row,
// over 64 threads, so both kinds see the same load on a shared machine.
// It reports the median of each kind and their difference.
func BenchAnswerCommit(b *testing.B, s khaladb.Storage) {
	ctx := b.Context()
	var ids []string
	for range 64 {
		ids = append(ids, StartThread(b, s, "bench", Epoch).Thread.ID)
	}
	u := &usage.Usage{Model: "gpt-test", InputTokens: usage.Int(1200), OutputTokens: usage.Int(80),
		CacheReadTokens: usage.Int(400), CostUSD: usage.Float(0.0031), DurationMS: 2100, SessionID: "s"}
	var plain, spent []time.Duration
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		withRow := i%2 == 1
		step := 1000 + i
		start := time.Now()
		err := s.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			at := Epoch.Add(time.Duration(i) * time.Millisecond)
			m := workflow.Message{Step: step, Role: "a", Agent: "agent", Content: "ok", At: at, Adapter: "codex", Usage: u}
			c := &khaladb.ThreadChange{Thread: v.Thread, Messages: []workflow.Message{m},
				Events: []workflow.Event{{At: at, Type: workflow.EventTurnAnswered, Thread: id, Step: step, Role: "a", Agent: "agent"}}}
			c.Thread.UpdatedAt = at
			if withRow {
				r := usage.Row{Key: usage.KeyOf(at, "bench", "a", "agent", "codex", u)}
				r.Add(u)
				c.Spent = []usage.Row{r}
			}
			return c, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if d := time.Since(start); withRow {
			spent = append(spent, d)
		} else {
			plain = append(plain, d)
		}
		i++
	}
	if len(plain) == 0 || len(spent) == 0 {
		return
	}
	p, sp := median(plain), median(spent)
	b.ReportMetric(float64(p.Microseconds()), "µs/answer-plain")
	b.ReportMetric(float64(sp.Microseconds()), "µs/answer-rollup")
	b.ReportMetric(100*(float64(sp)-float64(p))/float64(p), "%rollup")
	b.Log(fmt.Sprintf("%d answers each: median %s without the rollup row, %s with it", len(plain), p, sp))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
