package engine

import (
	"fmt"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// expire re-queues a turn whose lease ran out, or fails the thread when
// that was its last attempt. nil: someone else already dealt with it.
func expire(v *khaladb.ThreadView, d khaladb.DueTurn, now time.Time) *khaladb.ThreadChange {
	t := v.Turn(d.Turn)
	if t == nil || t.State != khaladb.TurnClaimed || t.Claim != d.Claim || now.Before(t.LeaseExpires) {
		return nil
	}
	c := &khaladb.ThreadChange{Thread: v.Thread}
	c.Thread.UpdatedAt = now
	ev := workflow.Event{At: now, Type: EventTurnExpired, Thread: t.Thread, Step: t.Step, Role: t.Role,
		Agent: t.Agent, Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt}
	if t.Attempt >= t.MaxAttempts {
		ev.Message = fmt.Sprintf("lease expired on attempt %d of %d", t.Attempt, t.MaxAttempts)
		c.Events = append(c.Events, ev)
		reason := fmt.Sprintf("turn %s (step %d, %s) was claimed %d times and never answered: the lease expired each time (max_attempts %d)",
			t.ID, t.Step, t.Role, t.Attempt, t.MaxAttempts)
		endThread(c, workflow.StatusFailed, nil, reason, openTurns(v, ""), now)
		return c
	}
	ev.Message = fmt.Sprintf("lease expired; re-queued as attempt %d of %d", t.Attempt+1, t.MaxAttempts)
	c.Events = append(c.Events, ev)
	nt := *t
	nt.Attempt++
	requeue(&nt, now)
	c.Turns = []khaladb.Turn{nt}
	return c
}

// idle raises a turn's idle event (once per time it is queued) and
// notifies the initiator; the turn stays queued.
func idle(v *khaladb.ThreadView, d khaladb.DueTurn, now time.Time) *khaladb.ThreadChange {
	t := v.Turn(d.Turn)
	if t == nil || (t.State != khaladb.TurnQueued && t.State != khaladb.TurnWaiting) || t.IdleAt.IsZero() || now.Before(t.IdleAt) {
		return nil
	}
	c := &khaladb.ThreadChange{Thread: v.Thread}
	nt := *t
	nt.IdleAt = time.Time{}
	c.Turns = []khaladb.Turn{nt}
	waited := now.Sub(t.QueuedAt).Round(time.Second)
	c.Events = []workflow.Event{{At: now, Type: EventTurnIdle, Thread: t.Thread, Step: t.Step, Role: t.Role,
		Turn: t.ID, Attempt: t.Attempt, Message: fmt.Sprintf("queued unclaimed for %s", waited)}}
	if t.State == khaladb.TurnWaiting {
		c.Events[0].Message = fmt.Sprintf("waited for a person's answer for %s", waited)
	}
	if th := v.Thread; th.Webhook != "" {
		c.Webhooks = []khaladb.Webhook{{URL: th.Webhook, NextAt: now, Created: now, Payload: khaladb.WebhookPayload{
			Event: EventTurnIdle, Thread: th.ID, Workflow: th.Workflow, Status: th.Status,
			Step: t.Step, Role: t.Role, Turn: t.ID}}}
	}
	return c
}

// release gives a turn agent holds under claim back to the queue at
// once; it keeps its attempt, since giving work back is not failing it.
func release(v *khaladb.ThreadView, turnID, claim, agent string, now time.Time) (*khaladb.ThreadChange, error) {
	t, err := heldTurn(v, turnID, claim, agent, now)
	if err != nil {
		return nil, err
	}
	c := &khaladb.ThreadChange{Thread: v.Thread}
	c.Thread.UpdatedAt = now
	c.Events = []workflow.Event{{At: now, Type: EventTurnReleased, Thread: t.Thread, Step: t.Step, Role: t.Role,
		Agent: t.Agent, Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt}}
	nt := *t
	requeue(&nt, now)
	c.Turns = []khaladb.Turn{nt}
	return c, nil
}

// CancelChange is the change that ends v's running thread, cancelled by
// agent; its outstanding claims become stale.
func CancelChange(v *khaladb.ThreadView, agent string, now time.Time) (*khaladb.ThreadChange, error) {
	if v.Thread.Ended() {
		return nil, fmt.Errorf("%w: %s is already %s", khaladb.ErrThreadEnded, v.Thread.ID, v.Thread.Status)
	}
	c := &khaladb.ThreadChange{Thread: v.Thread}
	endThread(c, workflow.StatusCancelled, nil, "cancelled by "+agent, openTurns(v, ""), now)
	return c, nil
}
