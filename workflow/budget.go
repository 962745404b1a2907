package workflow

import (
	"context"
	"fmt"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Budget returns the limits on what a thread of d may spend.
func (d *Definition) Budget() usage.Limits {
	return usage.Limits{MaxCostUSD: d.Limits.MaxCostUSD, MaxTokens: int64(d.Limits.MaxTokens)}
}

// OverBudget says why thread t of d must stop for what it spent
// ("budget: $5.12 spent of $5.00"), or "" while it is within its limits.
// The answer that crossed a limit is already in t.Usage and recorded.
func OverBudget(d *Definition, t *Thread) string { return d.Budget().Exceeded(t.Usage) }

// routeWithin is Route, but a thread over its budget fails instead of being
// given more turns. What children its agents started spent counts, though
// only the commit of this decision adds it to t's totals; the moderator's
// document has it too.
func (e *Engine) routeWithin(ctx context.Context, d *Definition, t *Thread, s State) (Decision, error) {
	late, err := e.Store.ChildSpend(t.ID)
	if err != nil {
		return Decision{}, err
	}
	s.Usage = t.Usage
	s.Usage.Merge(late)
	if reason := d.Budget().Exceeded(s.Usage); reason != "" {
		return Decision{Fail: reason}, nil
	}
	return Route(ctx, d, s)
}

// UsageRows makes a thread's messages usage rollup rows, one per message
// with usage that f selects: a thread's usage by any dimension.
func UsageRows(workflowName string, msgs []Message, f usage.Filter) []usage.Row {
	var rows []usage.Row
	for _, m := range msgs {
		if m.Usage == nil {
			continue
		}
		r := usage.Row{Key: usage.KeyOf(m.At, workflowName, m.Role, m.Agent, m.Adapter, m.Usage)}
		if !f.Match(r.Key) {
			continue
		}
		r.Add(m.Usage)
		rows = append(rows, r)
	}
	return rows
}

// UsageOf is what TreeUsageRows reads of one thread: its workflow, its
// messages and its children's ids.
type UsageOf struct {
	Workflow string
	Messages []Message
	Children []string
}

// TreeUsageRows is UsageRows of thread id and of its children (and
// theirs): what the thread spent, as its totals count it, and where (a
// child's rows carry the child's workflow). A running child's messages
// count so far. read loads a thread; a child it reports missing (missing
// says which errors mean that) is skipped: nothing it spent was kept. The
// thread itself missing is read's error as it came.
func TreeUsageRows(id string, f usage.Filter, read func(id string) (UsageOf, error), missing func(error) bool) ([]usage.Row, error) {
	t, err := read(id)
	if err != nil {
		return nil, err
	}
	rows := UsageRows(t.Workflow, t.Messages, f)
	for _, c := range t.Children {
		sub, err := TreeUsageRows(c, f, read, missing)
		if missing(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("child %s of %s: %w", c, id, err)
		}
		rows = append(rows, sub...)
	}
	return rows, nil
}

// RecountUsage sets t's totals from its messages (in the store) when it
// has none counted while they have usage: a thread recorded before totals
// were kept, so its budget holds after an upgrade too.
func (t *Thread) RecountUsage(msgs []Message) {
	if t.Usage.Messages > 0 {
		return
	}
	var tot usage.Totals
	for i := range msgs {
		tot.Add(msgs[i].Usage)
		if c := msgs[i].ChildUsage; c != nil {
			tot.Merge(*c)
		}
	}
	t.Usage = tot
}
