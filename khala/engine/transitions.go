package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/workflow"
)

// Khala event types, beside the workflow package's thread.started,
// turn.started (claimed by an agent), turn.answered, turn.failed and
// thread.ended.
const (
	EventTurnQueued   = "turn.queued"   // the moderator assigned a turn
	EventTurnExpired  = "turn.expired"  // a lease ran out unheartbeated
	EventTurnReleased = "turn.released" // the holder gave the turn back
	EventTurnIdle     = "turn.idle"     // queued unclaimed past limits.idle
)

// The functions below decide what a request does to a thread. Each is a
// function of the view it is given, so UpdateThread may run it again on a
// fresher view; the moderator itself is the workflow package's Route.

// AnswerRequest is an agent's answer to a turn it holds under Claim.
type AnswerRequest struct {
	Claim   string
	Agent   string
	Message workflow.Message // Content, Meta, Error, Adapter, Usage, Commit, Changes
	Step    int              // a merge turn's answer: the step whose commit did not merge
}

// startThread builds a new thread and routes its first step.
// ws is its workspace (nil: none), branch and head set.
// parent, when not nil, makes it a child thread one level below it.
func startThread(ctx context.Context, def *workflow.Definition, hash, id string, input map[string]any, ws *workflow.Workspace,
	webhook, initiator string, parent *workflow.Parent, depth int, rt routing, now time.Time) (*khaladb.ThreadChange, error) {
	c := &khaladb.ThreadChange{Thread: khaladb.Thread{
		Thread: workflow.Thread{ID: id, Workflow: def.Name, Status: workflow.StatusRunning, Input: input,
			Workspace: ws, Parent: parent, Depth: depth, CreatedAt: now, UpdatedAt: now},
		SourceHash: hash, Webhook: webhook, Initiator: initiator,
	}}
	c.Events = append(c.Events, workflow.Event{At: now, Type: workflow.EventThreadStarted, Thread: id,
		Agent: initiator, Status: workflow.StatusRunning})
	return c, routeThread(ctx, def, c, nil, nil, nil, rt, now)
}

// heldTurn returns open turn id of v when agent holds it under claim at
// now. Errors: errTurnClosed (the turn is not open), ErrClaimLost (the
// claim no longer holds it), ErrNotHolder (the claim is another agent's).
func heldTurn(v *khaladb.ThreadView, id, claim, agent string, now time.Time) (*khaladb.Turn, error) {
	t := v.Turn(id)
	switch {
	case t == nil:
		return nil, errTurnClosed
	case t.Claim != claim:
		return nil, khaladb.ErrClaimLost
	case t.Agent != agent:
		return nil, notHolder(id)
	case t.State != khaladb.TurnClaimed || now.After(t.LeaseExpires):
		return nil, khaladb.ErrClaimLost
	}
	return t, nil
}

// answer records an agent's answer and, when it was the last pending
// turn, asks the moderator what follows.
// docs, when not nil, is the thread's document cache (threadDocs).
func answer(ctx context.Context, defs *defCache, docs *workflow.DocCache, v *khaladb.ThreadView, turnID string, req AnswerRequest,
	rt routing, now time.Time) (*khaladb.ThreadChange, error) {
	t, err := heldTurn(v, turnID, req.Claim, req.Agent, now)
	if err != nil {
		return nil, err
	}
	def, err := defs.get(ctx, v.Thread.SourceHash)
	if err != nil {
		return nil, err
	}
	if t.Role == khaladb.MergeRole {
		return mergeAnswer(ctx, def, docs, v, t, req, rt, now)
	}
	m := req.Message
	m.Agent = req.Agent
	ev := workflow.Event{At: now, Type: workflow.EventTurnAnswered, Thread: t.Thread, Step: t.Step, Role: t.Role,
		Agent: req.Agent, Adapter: m.Adapter, Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt}
	if m.Error != nil {
		ev.Type, ev.Message = workflow.EventTurnFailed, m.Error.Kind+": "+m.Error.Message
	}
	return closeTurn(ctx, def, docs, v, t, m, ev, rt, now)
}

// closeTurn records m as open turn t's message (an agent's answer, a
// person's, or a child thread's outcome) and, when t was the last
// pending turn, asks the moderator what follows.
func closeTurn(ctx context.Context, def *workflow.Definition, docs *workflow.DocCache, v *khaladb.ThreadView, t *khaladb.Turn,
	m workflow.Message, ev workflow.Event, rt routing, now time.Time) (*khaladb.ThreadChange, error) {
	c := &khaladb.ThreadChange{Thread: v.Thread}
	m.Step, m.Role, m.Instruction, m.At = t.Step, t.Role, t.Instruction, now
	c.Messages = []workflow.Message{m}
	done := *t
	done.State = khaladb.TurnAnswered
	c.Turns = []khaladb.Turn{done}
	c.Events = []workflow.Event{ev}
	c.Thread.Pending = slices.DeleteFunc(slices.Clone(c.Thread.Pending), func(p workflow.Turn) bool { return p.Step == t.Step })
	c.Thread.UpdatedAt = now
	if started := cmp.Or(t.ClaimedAt, t.QueuedAt); !c.Thread.Noticed.IsZero() && started.After(c.Thread.Noticed) {
		c.Thread.Noticed = time.Time{} // a turn started after the notice: it stands no more
	}
	// The branch is at the answer's commit on the shared remote: the agent
	// pushed it (with a lease on the head it started from) before answering.
	// A parallel turn's commit waits under its turn ref for the merge.
	if !parallelStep(&c.Thread, t.Step) {
		c.Thread.Workspace = movedHead(c.Thread.Workspace, m.Commit)
	}
	c.Thread.RecountUsage(v.Messages)
	spend(c, m)
	if stopOverBudget(def, v, c, t.ID, now) {
		return c, nil
	}
	if len(c.Thread.Pending) > 0 {
		return c, nil // parallel turns: the moderator waits for all of them
	}
	msgs := append(slices.Clone(khaladb.WithStepErrors(&c.Thread, v.Messages)), m)
	slices.SortStableFunc(msgs, func(a, b workflow.Message) int { return a.Step - b.Step })
	if merging, err := queueMerge(def, c, msgs, now); merging || err != nil {
		return c, err // the merge turn's answer asks the moderator
	}
	return c, routeThread(ctx, def, c, msgs, openTurns(v, t.ID), docs, rt, now)
}

// routeThread asks the moderator and records its decision in c: new turns
// queued, or the thread's end. A moderator at fault fails the thread; only
// an interrupted evaluation (ctx) is an error.
func routeThread(ctx context.Context, def *workflow.Definition, c *khaladb.ThreadChange, msgs []workflow.Message, open []khaladb.Turn,
	docs *workflow.DocCache, rt routing, now time.Time) error {
	dec, err := workflow.Route(ctx, def, workflow.NewState(&c.Thread.Thread, msgs).WithCache(docs))
	var re *workflow.RoutingError
	switch {
	case errors.As(err, &re):
		endThread(c, workflow.StatusFailed, nil, re.Error(), open, now)
	case err != nil:
		return err
	case dec.Fail != "":
		endThread(c, workflow.StatusFailed, nil, dec.Fail, open, now)
	case dec.Done:
		endThread(c, workflow.StatusCompleted, dec.ResultFor(msgs), "", open, now)
	default:
		return queueTurns(def, c, dec.Turns, msgs, open, rt, now)
	}
	return nil
}

// queueTurns records the moderator's new turns in c: an agent's turn is
// queued for a claim, a person's waits for an answer, a child turn runs
// a child thread (started once c is committed; see children.go).
func queueTurns(def *workflow.Definition, c *khaladb.ThreadChange, turns []workflow.Turn, msgs []workflow.Message,
	open []khaladb.Turn, rt routing, now time.Time) error {
	th := &c.Thread
	ref := def.Name + "#" + th.ID
	ids, err := rt.childIDs(turns)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		if err := workflow.CheckDepth(th.Depth, rt.maxDepth); err != nil {
			endThread(c, workflow.StatusFailed, nil, fmt.Sprintf("workflow %s: %v", def.Name, err), open, now)
			return nil
		}
		th.Children = slices.Clone(th.Children)
	}
	for _, wt := range turns {
		t := khaladb.Turn{ID: khaladb.TurnID(th.ID, wt.Step), Thread: th.ID, Workflow: def.Name, Step: wt.Step, Role: wt.Role,
			Instruction: wt.Instruction, Attempt: 1, MaxAttempts: 1, FirstQueued: now, QueuedAt: now, Priority: th.Priority}
		markRepo(&t, def, th)
		ev := workflow.Event{At: now, Thread: th.ID, Step: t.Step, Role: t.Role, Turn: t.ID, Attempt: 1}
		switch {
		case wt.IsChild():
			t.State, t.Child, t.LeaseExpires = khaladb.TurnChild, ids[0], now.Add(ChildCheck)
			t.Instruction = "child workflow " + wt.Workflow
			ids = ids[1:]
			ev.Type, ev.Message = workflow.EventChildStarted, wt.Workflow+"#"+t.Child
			th.Children = append(th.Children, khaladb.ChildLink{Thread: t.Child, Workflow: wt.Workflow, Step: wt.Step,
				Status: workflow.StatusRunning})
		case def.IsHuman(wt.Role):
			t.State, t.Prompt, t.Idle = khaladb.TurnWaiting, workflow.Prompt(def, ref, wt, msgs), def.Limits.Idle.D()
			if t.Idle > 0 {
				t.IdleAt = now.Add(t.Idle)
			}
			ev.Type, ev.Message = workflow.EventTurnWaiting, "waiting for "+workflow.WhoAnswers(def.Answerers(wt.Role))
			if th.Webhook != "" {
				c.Webhooks = append(c.Webhooks, khaladb.Webhook{URL: th.Webhook, NextAt: now, Created: now, Payload: khaladb.WebhookPayload{
					Event: workflow.EventTurnWaiting, Thread: th.ID, Workflow: th.Workflow, Status: th.Status,
					Step: t.Step, Role: t.Role, Turn: t.ID, Message: ev.Message}})
			}
		default:
			t.Prompt, t.MaxAttempts = workflow.Prompt(def, ref, wt, msgs), max(def.Limits.MaxAttempts, 1)
			t.Lease, t.Idle = def.Limits.Claim.D(), def.Limits.Idle.D()
			requeue(&t, now)
			ev.Type, ev.Message = EventTurnQueued, t.Instruction
		}
		c.Turns = append(c.Turns, t)
		c.Events = append(c.Events, ev)
	}
	noteRound(th, turns)
	th.Pending = append(slices.Clone(th.Pending), turns...)
	th.Step += len(turns)
	return nil
}

// requeue puts t back in the queue (or in it for the first time).
func requeue(t *khaladb.Turn, now time.Time) {
	t.State, t.Claim, t.Agent = khaladb.TurnQueued, "", ""
	t.QueuedAt, t.ClaimedAt, t.LeaseExpires, t.IdleAt = now, time.Time{}, time.Time{}, time.Time{}
	if t.Idle > 0 {
		t.IdleAt = now.Add(t.Idle)
	}
}

// endThread ends the thread of c. Its open turns are cancelled, keeping
// their claims so a holder's heartbeat learns of it (cancel: true) and its
// response is refused.
func endThread(c *khaladb.ThreadChange, status string, result any, reason string, open []khaladb.Turn, now time.Time) {
	th := &c.Thread
	th.Status, th.Result, th.Error, th.Pending = status, result, reason, nil
	th.EndedAt, th.UpdatedAt = now, now
	for _, t := range open {
		t.State = khaladb.TurnCancelled
		setTurn(c, t)
	}
	c.Events = append(c.Events, workflow.Event{At: now, Type: workflow.EventThreadEnded, Thread: th.ID,
		Status: status, Message: reason})
	if th.Webhook != "" {
		c.Webhooks = append(c.Webhooks, khaladb.Webhook{URL: th.Webhook, NextAt: now, Created: now, Payload: khaladb.WebhookPayload{
			Event: workflow.EventThreadEnded, Thread: th.ID, Workflow: th.Workflow, Status: status,
			Result: result, Error: reason, Workspace: th.Workspace}})
	}
}
