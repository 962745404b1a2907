package workflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// spending answers each role with a fixed usage; role c answers last.
func spending(cost map[string]float64, tokens int64) workflow.TurnFunc {
	return func(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
		if turn.Role == "c" {
			time.Sleep(50 * time.Millisecond)
		}
		return workflow.Message{Content: turn.Role, Meta: map[string]any{"ok": true}, Usage: &usage.Usage{Model: "m",
			InputTokens: usage.Int(tokens), OutputTokens: usage.Int(0), CostUSD: usage.Float(cost[turn.Role])}}
	}
}

func TestBudgetCrossedByTheLastTurnOfAParallelSet(t *testing.T) {
	// The moderator would go on forever: only the budget ends the thread.
	const forever = `$count(messages) = 0 ? [{"role": "a"}, {"role": "b"}, {"role": "c"}] : {"role": "a"}`
	cases := []struct {
		name, limits, want string
		cost               map[string]float64
		tokens             int64
	}{
		{"cost", "max_cost_usd: 5", "budget: $6.12 spent of $5.00", map[string]float64{"a": 1, "b": 1, "c": 4.12}, 10},
		{"tokens", "max_tokens: 3000000", "budget: 3,000,003 tokens of 3,000,000", nil, 1_000_001},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			d := parseWith(t, forever, tc.limits)
			th := newThread(t, st, d)
			e := &workflow.Engine{Store: st, Turn: spending(tc.cost, tc.tokens), Agent: "test-agent"}
			if err := e.Run(context.Background(), d, th); err != nil {
				t.Fatal(err)
			}
			stored, _ := st.Thread(th.ID)
			msgs, _ := st.Messages(th.ID)
			evs, _ := st.Events(th.ID, 0)
			if stored.Status != workflow.StatusFailed || stored.Error != tc.want {
				t.Fatalf("thread %s: %q, want failed: %q", stored.Status, stored.Error, tc.want)
			}
			if len(msgs) != 3 || stored.Usage.Messages != 3 {
				t.Fatalf("%d messages, usage %+v: the crossing answer must be recorded", len(msgs), stored.Usage)
			}
			started := 0
			for _, ev := range evs {
				if ev.Type == workflow.EventTurnStarted {
					started++
				}
			}
			if started != 3 {
				t.Fatalf("%d turns started, want the 3 of the parallel set and no more", started)
			}
		})
	}
}

func TestBudgetReachedExactlyGoesOn(t *testing.T) {
	d := parseWith(t, `$count(messages) < 2 ? {"role": "a"} : {"done": true}`, "max_cost_usd: 2")
	st := openStore(t)
	th := newThread(t, st, d)
	e := &workflow.Engine{Store: st, Turn: spending(map[string]float64{"a": 1}, 5), Agent: "test-agent"}
	if err := e.Run(context.Background(), d, th); err != nil {
		t.Fatal(err)
	}
	if th.Status != workflow.StatusCompleted || th.Usage.CostUSD == nil || *th.Usage.CostUSD != 2 || th.Usage.Tokens() != 10 {
		t.Fatalf("thread %s %q, usage %+v", th.Status, th.Error, th.Usage)
	}
}

func TestBadLimits(t *testing.T) {
	for limits, want := range map[string]string{
		"max_cost_usd: -1":   "limits.max_cost_usd: must be a non-negative amount",
		"max_tokens: -5":     "limits.max_tokens: must not be negative",
		"max_cost_usd: lots": "limits.max_cost_usd",
		"max_tokens: 1.5":    "limits.max_tokens",
		"max_tokens: [1]":    "limits.max_tokens",
		"max_cost_usd: '5'":  "limits.max_cost_usd",
		"max_cost_usd: .nan": "limits.max_cost_usd",
	} {
		_, err := workflow.Parse("w.yaml", []byte(source(`{"done": true}`, limits)), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", limits, err, want)
		}
	}
}

func source(moderator, limits string) string {
	return "workflow: w\nmoderator: '" + strings.ReplaceAll(moderator, "'", "''") + "'\nlimits: {max_steps: 20, " + limits + "}\nroles:\n" +
		"  a: {adapter: x, prompt: A}\n  b: {adapter: x, prompt: B}\n  c: {adapter: x, prompt: C}\n"
}

func parseWith(t testing.TB, moderator, limits string) *workflow.Definition {
	t.Helper()
	d, err := workflow.Parse("w.yaml", []byte(source(moderator, limits)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A thread stored before totals were kept gets them from its messages
// when it resumes, and its budget holds.
func TestBudgetOfAThreadFromBeforeTotals(t *testing.T) {
	st := openStore(t)
	d := parseWith(t, `{"role": "a"}`, "max_tokens: 25")
	th := newThread(t, st, d)
	th.Step, th.Pending = 2, []workflow.Turn{{Step: 2, Role: "a"}}
	old := workflow.Message{Step: 1, Role: "a", Content: "x", Usage: &usage.Usage{InputTokens: usage.Int(20)}}
	if err := st.Commit(workflow.Update{Thread: th, Messages: []workflow.Message{old}}); err != nil {
		t.Fatal(err)
	}
	th.Usage = usage.Totals{} // as a record from before totals has it
	e := &workflow.Engine{Store: st, Turn: spending(nil, 10), Agent: "test-agent"}
	if err := e.Run(context.Background(), d, th); err != nil {
		t.Fatal(err)
	}
	if th.Status != workflow.StatusFailed || th.Error != "budget: 30 tokens of 25" || th.Usage.Messages != 2 {
		t.Fatalf("thread %s %q %+v", th.Status, th.Error, th.Usage)
	}
}
