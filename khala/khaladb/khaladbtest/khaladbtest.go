package khaladbtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Opener opens a store on a fresh, empty database, closed when t ends.
type Opener func(t testing.TB) khaladb.Storage

// Exercise runs the whole contract against stores open makes, each part
// as a subtest.
func Exercise(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		{"ClaimExactlyOnce", ClaimExactlyOnce},
		{"ClaimOrderAndFilters", ClaimOrderAndFilters},
		{"ClaimRepos", ClaimRepos},
		{"Heartbeat", Heartbeat},
		{"HeartbeatWrites", HeartbeatWrites},
		{"ClaimPriority", ClaimPriority},
		{"UpdateThreadReruns", UpdateThreadReruns},
		{"UpdateThreadOutcomes", UpdateThreadOutcomes},
		{"DueTurns", DueTurns},
		{"Events", Events},
		{"Wakeups", Wakeups},
		{"Workspace", Workspace},
		{"MergeTurn", MergeTurn},
		{"People", People},
		{"Agents", Agents},
		{"ScopesAndRevoke", ScopesAndRevoke},
		{"WorkflowOwner", WorkflowOwner},
		{"PeopleAndChildTurns", PeopleAndChildTurns},
		{"UsageRollup", UsageRollup},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open) })
	}
}

// Epoch is the time the suite's threads start at: whole microseconds
// (every backend keeps times to the nanosecond, in UTC).
var Epoch = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// TurnSpec is one turn StartThread queues.
type TurnSpec struct {
	Role     string
	Lease    time.Duration // default 1m
	Idle     time.Duration // 0: never idle
	Priority int
	Repo     string // the thread's workspace repository: Turn.Repo
	Declared bool   // Turn.RepoDeclared
}

// StartThread stores a new running thread of workflow wf, created at now,
// with one queued turn per spec at steps 1, 2, ... (parallel turns), and
// its thread.started and turn.queued events, as the server's engine
// would. It returns the thread's view as read back.
func StartThread(t testing.TB, s khaladb.Storage, wf string, now time.Time, specs ...TurnSpec) *khaladb.ThreadView {
	t.Helper()
	ctx := context.Background()
	id, err := s.NextThreadID(ctx)
	if err != nil {
		t.Fatalf("next thread id: %v", err)
	}
	c := &khaladb.ThreadChange{Thread: khaladb.Thread{
		Thread: workflow.Thread{ID: id, Workflow: wf, Status: workflow.StatusRunning,
			Input: map[string]any{}, CreatedAt: now, UpdatedAt: now},
		SourceHash: "0000",
	}}
	c.Events = append(c.Events, workflow.Event{At: now, Type: workflow.EventThreadStarted, Thread: id, Status: workflow.StatusRunning})
	for i, sp := range specs {
		step := i + 1
		tk := khaladb.Turn{ID: khaladb.TurnID(id, step), Thread: id, Workflow: wf, Step: step, Role: sp.Role,
			Instruction: fmt.Sprintf("do step %d", step), Prompt: "prompt", State: khaladb.TurnQueued,
			Attempt: 1, MaxAttempts: 3, Lease: cmpOr(sp.Lease, time.Minute), Idle: sp.Idle,
			FirstQueued: now, QueuedAt: now, Priority: sp.Priority, Repo: sp.Repo, RepoDeclared: sp.Declared}
		if sp.Idle > 0 {
			tk.IdleAt = now.Add(sp.Idle)
		}
		c.Turns = append(c.Turns, tk)
		c.Thread.Pending = append(c.Thread.Pending, workflow.Turn{Step: step, Role: sp.Role, Instruction: tk.Instruction})
		c.Events = append(c.Events, workflow.Event{At: now, Type: "turn.queued", Thread: id, Step: step, Role: sp.Role, Turn: tk.ID, Attempt: 1})
	}
	c.Thread.Step = len(specs)
	if err := s.CreateThread(ctx, c); err != nil {
		t.Fatalf("create thread: %v", err)
	}
	v, err := s.Thread(ctx, id)
	if err != nil {
		t.Fatalf("read thread %s: %v", id, err)
	}
	return v
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// AnswerChange is the change an answer to turn id of v makes, as the
// server's engine makes it: the turn answered, its message and event, and
// the thread completed when no other turn is pending. It returns nil when
// the turn is not open under claim in v.
func AnswerChange(v *khaladb.ThreadView, id, claim, content string, now time.Time) *khaladb.ThreadChange {
	tk := v.Turn(id)
	if tk == nil || tk.State != khaladb.TurnClaimed || tk.Claim != claim {
		return nil
	}
	c := &khaladb.ThreadChange{Thread: v.Thread}
	done := *tk
	done.State = khaladb.TurnAnswered
	c.Turns = []khaladb.Turn{done}
	c.Messages = []workflow.Message{{Step: tk.Step, Role: tk.Role, Agent: tk.Agent, Content: content, At: now}}
	c.Events = []workflow.Event{{At: now, Type: workflow.EventTurnAnswered, Thread: tk.Thread, Step: tk.Step,
		Role: tk.Role, Agent: tk.Agent, Turn: tk.ID, Claim: tk.Claim, Attempt: tk.Attempt}}
	var pending []workflow.Turn
	for _, p := range v.Thread.Pending {
		if p.Step != tk.Step {
			pending = append(pending, p)
		}
	}
	c.Thread.Pending, c.Thread.UpdatedAt = pending, now
	if len(pending) == 0 {
		c.Thread.Status, c.Thread.EndedAt = workflow.StatusCompleted, now
		c.Events = append(c.Events, workflow.Event{At: now, Type: workflow.EventThreadEnded, Thread: tk.Thread, Status: workflow.StatusCompleted})
	}
	return c
}

// Answer answers turn tk (claimed) with content through UpdateThread.
func Answer(t testing.TB, s khaladb.Storage, tk khaladb.Turn, content string, now time.Time) {
	t.Helper()
	err := s.UpdateThread(context.Background(), tk.Thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := AnswerChange(v, tk.ID, tk.Claim, content, now)
		if c == nil {
			return nil, khaladb.ErrClaimLost
		}
		return c, nil
	})
	if err != nil {
		t.Fatalf("answer %s: %v", tk.ID, err)
	}
}

// ClaimAll claims every turn it can for agent at now, one at a time.
func ClaimAll(t testing.TB, s khaladb.Storage, agent string, now time.Time) []khaladb.Turn {
	t.Helper()
	var out []khaladb.Turn
	for {
		got, err := s.Claim(context.Background(), khaladb.ClaimQuery{Agent: agent, Max: 1, Now: now})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(got) == 0 {
			return out
		}
		out = append(out, got...)
	}
}

// eventTypes lists the types of evs, for messages.
func eventTypes(evs []workflow.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}
