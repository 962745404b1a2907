package engine

import (
	"slices"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// spend counts answer m of c's thread in the thread's totals and, in the
// same change, in the usage rollup; a child's result counts its totals.
func spend(c *khaladb.ThreadChange, m workflow.Message) {
	if m.ChildUsage != nil {
		c.Thread.Usage.Merge(*m.ChildUsage) // the child's own answers are in the rollup already
	}
	if m.Usage == nil {
		return
	}
	c.Thread.Usage.Add(m.Usage)
	r := usage.Row{Key: usage.KeyOf(m.At, c.Thread.Workflow, m.Role, m.Agent, m.Adapter, m.Usage)}
	r.Add(m.Usage)
	c.Spent = append(c.Spent, r)
}

// stopOverBudget reports whether c's thread, its answer to turn answered
// recorded, has crossed a limit of def. Then nothing more starts: its
// turns not claimed are cancelled, and claimed ones may finish (their
// answers are recorded too); when none is left the thread fails with the
// budget's reason. The moderator is not asked again.
func stopOverBudget(def *workflow.Definition, v *khaladb.ThreadView, c *khaladb.ThreadChange, answered string, now time.Time) bool {
	reason := workflow.OverBudget(def, &c.Thread.Thread)
	if reason == "" {
		return false
	}
	for _, t := range openTurns(v, answered) {
		if t.State == khaladb.TurnClaimed {
			continue
		}
		t.State = khaladb.TurnCancelled
		setTurn(c, t)
		c.Thread.Pending = slices.DeleteFunc(c.Thread.Pending, func(p workflow.Turn) bool { return p.Step == t.Step })
	}
	if len(c.Thread.Pending) == 0 {
		endThread(c, workflow.StatusFailed, nil, reason, nil, now)
	}
	return true
}

// expireOverBudget is expire for a thread that has crossed a limit of
// def: the turn whose lease ran out is not queued again (nothing more
// starts) but cancelled, and the thread fails once no claimed turn is
// left. nil when the thread is within its limits (or the lease is not
// out), for expire to deal with.
func expireOverBudget(def *workflow.Definition, v *khaladb.ThreadView, d khaladb.DueTurn, now time.Time) *khaladb.ThreadChange {
	t := v.Turn(d.Turn)
	if t == nil || t.State != khaladb.TurnClaimed || t.Claim != d.Claim || now.Before(t.LeaseExpires) {
		return nil
	}
	reason := workflow.OverBudget(def, &v.Thread.Thread)
	if reason == "" {
		return nil
	}
	c := &khaladb.ThreadChange{Thread: v.Thread}
	c.Thread.UpdatedAt = now
	c.Events = []workflow.Event{{At: now, Type: EventTurnExpired, Thread: t.Thread, Step: t.Step, Role: t.Role,
		Agent: t.Agent, Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt, Message: "lease expired; not queued again: " + reason}}
	done := *t
	done.State = khaladb.TurnCancelled
	c.Turns = []khaladb.Turn{done}
	c.Thread.Pending = slices.DeleteFunc(slices.Clone(c.Thread.Pending), func(p workflow.Turn) bool { return p.Step == t.Step })
	stopOverBudget(def, v, c, t.ID, now)
	return c
}
