package khala

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// trioWF asks three roles in parallel and would go on forever: only its
// budget ends it.
const trioWF = `workflow: trio
binding: cloud
moderator: |
  $count(messages) = 0 ? [{"role": "a"}, {"role": "b"}, {"role": "c"}] : {"role": "a"}
roles:
  a: {prompt: A.}
  b: {prompt: B.}
  c: {prompt: C.}
limits:
  max_cost_usd: 1
  max_tokens: 1000
`

// answerWith answers t as adapter with a usage.
func (c *client) answerWith(t api.Turn, adapter string, u usage.Usage) {
	c.ts.t.Helper()
	c.must("POST", "/v1/turns/"+t.Turn+"/response", map[string]any{"claim": t.Claim, "content": "done " + t.Role,
		"adapter": adapter, "usage": u}, 200, nil)
}

func costing(model string, tokens int64, cost float64) usage.Usage {
	return usage.Usage{Model: model, InputTokens: usage.Int(tokens), OutputTokens: usage.Int(0), CacheReadTokens: usage.Int(0),
		CostUSD: usage.Float(cost), DurationMS: 100}
}

func (c *client) usage(query string) usage.Report {
	c.ts.t.Helper()
	var r usage.Report
	c.must("GET", "/v1/usage"+query, nil, 200, &r)
	return r
}

func TestBudgetCrossedByTheLastTurnOfAParallelSet(t *testing.T) {
	eachBackend(t, testBudgetLastOfParallel)
}

func testBudgetLastOfParallel(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(trioWF)
	id := a.start("trio", nil, "")
	turns := a.claim(map[string]any{"max": 3, "wait": "5s"})
	if len(turns) != 3 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	a.answerWith(turns[0], "claude", costing("opus", 10, 0.4))
	a.answerWith(turns[1], "codex", costing("gpt", 10, 0.4))
	if th := a.thread(id); th.Status != workflow.StatusRunning {
		t.Fatalf("within budget: %s %q", th.Status, th.Error)
	}
	a.answerWith(turns[2], "codex", costing("gpt", 10, 0.4))
	th := a.thread(id)
	if th.Status != workflow.StatusFailed || th.Error != "budget: $1.20 spent of $1.00" {
		t.Fatalf("thread %s %q", th.Status, th.Error)
	}
	if th.Usage.Messages != 3 || th.Usage.Tokens() != 30 || len(th.Turns) != 0 {
		t.Fatalf("usage %+v, open turns %+v", th.Usage, th.Turns)
	}
	if got := a.claim(map[string]any{"max": 3}); len(got) != 0 {
		t.Fatalf("a turn was queued after the budget: %+v", got)
	}

	// The rollup, by every dimension, and one thread's.
	for by, want := range map[string]map[string]int64{
		"workflow": {"trio": 3},
		"role":     {"a": 1, "b": 1, "c": 1},
		"agent":    {"a": 3},
		"adapter":  {"claude": 1, "codex": 2},
		"model":    {"opus": 1, "gpt": 2},
	} {
		for _, q := range []string{"?by=" + by, "?by=" + by + "&thread=" + id} {
			r := a.usage(q)
			got := map[string]int64{}
			for _, g := range r.Groups {
				got[g.Key] = g.Messages
			}
			if len(got) != len(want) || r.Total.Messages != 3 || r.By != by {
				t.Fatalf("%s: %v, want %v", q, got, want)
			}
			for k, n := range want {
				if got[k] != n {
					t.Fatalf("%s: %v, want %v", q, got, want)
				}
			}
		}
	}
	r := a.usage("?by=day&since=2000-01-01&workflow=trio")
	if len(r.Groups) != 1 || r.Since == nil || *r.Workflow != "trio" || *r.Total.CostUSD < 1.19 {
		t.Fatalf("by day: %+v", r)
	}
	if r := a.usage("?workflow=other"); len(r.Groups) != 0 || r.Total.Messages != 0 {
		t.Fatalf("another workflow: %+v", r)
	}
	b, _ := json.Marshal(a.usage("?since=2999-01-01"))
	if want := `{"by":"workflow","since":"2999-01-01","workflow":null,"groups":[],"total":{"messages":0,"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cost_usd":null,"unpriced":0,"duration_ms":0}}`; string(b) != want {
		t.Fatalf("empty report %s", b)
	}
}

// A budget crossed while a parallel turn is still queued cancels it; the
// claimed one finishes and is recorded, then the thread fails.
func TestBudgetStopsWhatIsNotClaimed(t *testing.T) { eachBackend(t, testBudgetStopsUnclaimed) }

func testBudgetStopsUnclaimed(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(trioWF)
	id := a.start("trio", nil, "")
	turns := a.claim(map[string]any{"max": 2, "wait": "5s"})
	if len(turns) != 2 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	a.answerWith(turns[0], "codex", costing("gpt", 2000, 0))
	th := a.thread(id)
	if th.Status != workflow.StatusRunning || len(th.Turns) != 1 || th.Turns[0].Step != turns[1].Step {
		t.Fatalf("after the crossing answer: %s, open %+v", th.Status, th.Turns)
	}
	if got := a.claim(map[string]any{"max": 3}); len(got) != 0 {
		t.Fatalf("the queued turn was claimable: %+v", got)
	}
	a.answerWith(turns[1], "codex", costing("gpt", 5, 0))
	th = a.thread(id)
	if th.Status != workflow.StatusFailed || th.Error != "budget: 2,005 tokens of 1,000" || th.Usage.Messages != 2 {
		t.Fatalf("thread %s %q %+v", th.Status, th.Error, th.Usage)
	}
}

// A claimed turn whose lease runs out after its thread crossed a limit is
// not queued again: the thread fails instead.
func TestBudgetExpiredLeaseIsNotRequeued(t *testing.T) { eachBackend(t, testBudgetExpiredLease) }

func testBudgetExpiredLease(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(strings.Replace(trioWF, "  max_tokens: 1000\n", "  max_tokens: 1000\n  claim: 1s\n", 1))
	id := a.start("trio", nil, "")
	turns := a.claim(map[string]any{"max": 3, "wait": "5s"})
	if len(turns) != 3 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	a.answerWith(turns[0], "codex", costing("gpt", 2000, 0))
	waitFor(t, "the thread to fail", func() bool { return a.thread(id).Status != workflow.StatusRunning })
	th := a.thread(id)
	if th.Status != workflow.StatusFailed || th.Error != "budget: 2,000 tokens of 1,000" || len(th.Turns) != 0 {
		t.Fatalf("thread %s %q, open %+v", th.Status, th.Error, th.Turns)
	}
	if got := a.claim(map[string]any{"max": 3}); len(got) != 0 {
		t.Fatalf("an expired turn was queued again: %+v", got)
	}
	if types := eventTypes(a.trace(id)); strings.Count(types, "turn.queued") != 3 {
		t.Fatalf("trace: %s", types)
	}
}
