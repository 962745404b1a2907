package khaladbtest

import (
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// spentRow is one answer's usage row.
func spentRow(day, wf, role, agent, model string, tokens int64, cost *float64) usage.Row {
	r := usage.Row{Key: usage.Key{Day: day, Workflow: wf, Role: role, Agent: agent, Adapter: "codex", Model: model}}
	r.Add(&usage.Usage{Model: model, InputTokens: usage.Int(tokens), OutputTokens: usage.Int(1), CostUSD: cost, DurationMS: 10})
	return r
}

// UsageRollup: the rows of ThreadChange.Spent are added to the rollup in
// the change's commit, concurrent answers of one key from many threads
// lose nothing, and Usage selects by day and workflow.
func UsageRollup(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	const threads, each = 6, 5
	var wg sync.WaitGroup
	for i := range threads {
		wf := "review"
		if i%3 == 0 {
			wf = "fix"
		}
		v := StartThread(t, s, wf, Epoch)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				err := s.UpdateThread(ctx, v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
					c := &khaladb.ThreadChange{Thread: v.Thread}
					c.Thread.UpdatedAt = Epoch.Add(time.Duration(k+1) * time.Second)
					day := "2026-11-22"
					if k == each-1 {
						day = "2026-11-23"
					}
					c.Spent = []usage.Row{spentRow(day, wf, "author", "laptop", "gpt", 100, usage.Float(0.25)),
						spentRow(day, wf, "author", "laptop", "gpt", 10, nil)} // one key twice in a change
					return c, nil
				})
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rows, err := s.Usage(ctx, usage.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	r := usage.Build(rows, "workflow", usage.Filter{})
	tot := r.Total
	if tot.Messages != 2*threads*each || tot.InputTokens != 110*threads*each || tot.Unpriced != threads*each ||
		tot.CostUSD == nil || *tot.CostUSD != 0.25*threads*each || tot.DurationMS != 20*threads*each {
		t.Fatalf("total %+v", tot)
	}
	if len(r.Groups) != 2 || r.Groups[0].Key != "review" || r.Groups[0].Messages != 2*4*each {
		t.Fatalf("by workflow %+v", r.Groups)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want one per key (2 workflows x 2 days): shards are summed", len(rows))
	}
	rows, err = s.Usage(ctx, usage.Filter{Since: "2026-11-23", Workflow: "fix"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Day != "2026-11-23" || rows[0].Workflow != "fix" || rows[0].Messages != 2*2 {
		t.Fatalf("since and workflow: %+v", rows)
	}
	// A key whose costs are all unknown has a null cost.
	v := StartThread(t, s, "free", Epoch)
	err = s.UpdateThread(ctx, v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		return &khaladb.ThreadChange{Thread: v.Thread, Spent: []usage.Row{spentRow("2026-11-22", "free", "r", "a", "m", 5, nil)}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, _ = s.Usage(ctx, usage.Filter{Workflow: "free"})
	if len(rows) != 1 || rows[0].CostUSD != nil || rows[0].Unpriced != 1 {
		t.Fatalf("unpriced: %+v", rows)
	}
}
