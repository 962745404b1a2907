package workflow

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/recolabs/gnata"
)

// codeReviewState is the state BenchmarkModerator (daemon) routes: the
// code-review example after four messages.
func codeReviewState(b *testing.B) (*Definition, State) {
	def, err := LoadFile("../examples/code-review.yaml")
	if err != nil {
		b.Fatal(err)
	}
	th := &Thread{ID: "thread-1", Workflow: def.Name, Step: 4, Input: map[string]any{"change": "Add retries", "max_rounds": 3}}
	var msgs []Message
	for i := 1; i <= 4; i++ {
		m := Message{Step: i, Role: "author", Agent: "a", Content: "answer " + strconv.Itoa(i), At: time.Now()}
		if i%2 == 0 {
			m.Role, m.Meta = "reviewer", map[string]any{"approved": i == 4, "findings": []any{"one", "two"}}
		}
		msgs = append(msgs, m)
	}
	return def, NewState(th, msgs)
}

// countingCtx counts the calls of Err an evaluation makes.
type countingCtx struct {
	context.Context
	n int
}

func (c *countingCtx) Err() error { c.n++; return c.Context.Err() }

// BenchmarkModeratorBounds is the moderator bounds' own cost in the
// routing step BenchmarkModerator measures: the heap watch with as many
// calls of Err as that evaluation makes, and the check of its output.
// bounds-% is that cost against the whole routing step (Route), timed
// alongside over as many runs.
func BenchmarkModeratorBounds(b *testing.B) {
	def, s := codeReviewState(b)
	ctx := context.Background()
	c := &countingCtx{Context: ctx}
	out, err := def.Moderator.expr.Eval(c, s.document())
	if err != nil {
		b.Fatal(err)
	}
	out = gnata.NormalizeValue(out)
	calls := c.n
	// The routing step, timed over as many runs, outside the timer.
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := Route(ctx, def, s); err != nil {
			b.Fatal(err)
		}
	}
	route := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := newEvalWatch(ctx)
		for range calls {
			if w.Err() != nil {
				b.Fatal("stopped")
			}
		}
		if why := checkOutput(out); why != "" {
			b.Fatal(why)
		}
	}
	b.StopTimer()
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(float64(calls), "err-calls")
	b.ReportMetric(route, "route-ns")
	b.ReportMetric(100*per/route, "bounds-%")
}
