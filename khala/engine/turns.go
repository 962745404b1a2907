package engine

import (
	"context"
	"errors"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// What a turn's holder does to it: heartbeat, answer, release, add what
// it noticed. A request on a turn that is not open is resolved by
// closedTurn, once the change refused it.

// Heartbeat extends agent's lease on turn under claim; the turn comes
// back cancelled when its thread ended (the holder stops).
func (e *Engine) Heartbeat(ctx context.Context, turn, claim, agent string) (khaladb.Turn, error) {
	t, err := e.store.Heartbeat(ctx, turn, claim, agent, e.now())
	switch {
	case errors.Is(err, khaladb.ErrNotFound):
		err = notFound("unknown turn %q", turn)
	case errors.Is(err, khaladb.ErrNotHolder):
		err = notHolder(turn)
	}
	return t, err
}

// Answered is what an answer did: the thread's status after it, and for
// an answer recorded now (Fresh, not a resent one) the message's time.
type Answered struct {
	Status string
	At     time.Time
	Fresh  bool
}

// Answer records the answer of turn's holder and routes thread when it
// was the last pending turn; the turns that routing queues go to long
// polls waiting here in the same commit. A resent answer (the agent's
// outbox after a lost reply) is acknowledged again.
func (e *Engine) Answer(ctx context.Context, thread, turn string, req AnswerRequest) (Answered, error) {
	var (
		c       *khaladb.ThreadChange
		out     Answered
		claimed time.Time
		handed  *reservation
	)
	defer func() { handed.settle(false) }() // if UpdateThread never returned
	docs, releaseDocs := e.docs.acquire(thread)
	defer releaseDocs()
	err := e.updateRouted(ctx, thread, func(v *khaladb.ThreadView, rt routing) (*khaladb.ThreadChange, error) {
		handed.settle(false) // an earlier, stale try's promises
		handed = nil
		out.At = e.now()
		var err error
		c, err = answer(ctx, e.defs, docs, v, turn, req, rt, out.At)
		if err != nil {
			return nil, err
		}
		out.Status, claimed = c.Thread.Status, v.Turn(turn).ClaimedAt
		handed = e.handoffs.reserve(c, out.At)
		return c, nil
	})
	handed.settle(err == nil)
	handed = nil
	if errors.Is(err, errTurnClosed) {
		out.Status, err = e.closedTurn(ctx, turn, req.Claim, req.Agent, true)
	} else if err == nil {
		e.obs.TurnAnswered(out.At.Sub(claimed))
		e.changed(c)
		out.Fresh = true
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown turn %q", turn)
	}
	return out, err
}

// Release puts a turn agent holds under claim back in the queue at once.
func (e *Engine) Release(ctx context.Context, thread, turn, claim, agent string) error {
	err := e.releaseTurn(ctx, thread, turn, claim, agent)
	if errors.Is(err, errTurnClosed) {
		_, err = e.closedTurn(ctx, turn, claim, agent, false)
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown turn %q", turn)
	}
	return err
}

// releaseTurn puts a claimed turn back in the queue, for its holder.
func (e *Engine) releaseTurn(ctx context.Context, thread, turn, claim, agent string) error {
	var c *khaladb.ThreadChange
	err := e.store.UpdateThread(ctx, thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		var err error
		c, err = release(v, turn, claim, agent, e.now())
		return c, err
	})
	if err == nil && c != nil {
		e.obs.TurnReleased()
		e.changed(c)
	}
	return err
}

// TurnEvents adds what agent noticed while running turn, which it holds
// under claim (checked as a heartbeat's is), to the thread's trace: a
// detection, or a notify, which also goes to the thread's webhook. The
// change only appends events; it never moves the turn or the thread.
func (e *Engine) TurnEvents(ctx context.Context, thread, turn, claim, agent string, events []api.TurnEvent) error {
	err := e.store.UpdateThread(ctx, thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		now := e.now()
		t, err := heldTurn(v, turn, claim, agent, now)
		if err != nil {
			return nil, err
		}
		c := &khaladb.ThreadChange{Thread: v.Thread}
		th := v.Thread
		for _, ev := range events {
			if ev.Type == api.EventNotify && ev.Status == api.NotifyBlocking {
				c.Thread.Noticed = now
			}
			c.Events = append(c.Events, workflow.Event{At: now, Type: ev.Type, Thread: t.Thread,
				Step: t.Step, Role: t.Role, Agent: agent, Adapter: ev.Adapter, Status: ev.Status, Message: ev.Message,
				Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt})
			if ev.Type == api.EventNotify && th.Webhook != "" {
				c.Webhooks = append(c.Webhooks, khaladb.Webhook{URL: th.Webhook, NextAt: now, Created: now, Payload: khaladb.WebhookPayload{
					Event: api.EventNotify, Thread: th.ID, Workflow: th.Workflow, Status: th.Status,
					Step: t.Step, Role: t.Role, Turn: t.ID, Level: ev.Status, Message: ev.Message}})
			}
		}
		return c, nil
	})
	if errors.Is(err, errTurnClosed) {
		_, err = e.closedTurn(ctx, turn, claim, agent, false)
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown turn %q", turn)
	}
	return err
}

// closedTurn resolves agent's request for a turn that is not open:
// unknown (ErrNotFound), another agent's claim (ErrNotHolder), answered
// under this claim (the thread's status, when answerOK), or stale
// (ErrClaimLost).
func (e *Engine) closedTurn(ctx context.Context, turn, claim, agent string, answerOK bool) (string, error) {
	t, err := e.store.Turn(ctx, turn)
	if err != nil {
		return "", err
	}
	if t.Claim == claim && t.Agent != agent {
		return "", notHolder(turn)
	}
	if !answerOK || t.State != khaladb.TurnAnswered || t.Claim != claim {
		return "", khaladb.ErrClaimLost
	}
	v, err := e.store.Thread(ctx, t.Thread)
	if err != nil {
		return "", err
	}
	return v.Thread.Status, nil
}

// Cancel ends running thread id, cancelled by agent; may, when not nil,
// refuses a caller who may not cancel it. Its outstanding claims become
// stale, its children are cancelled and its parent told.
func (e *Engine) Cancel(ctx context.Context, id, agent string, may func(*khaladb.ThreadView) error) (khaladb.Thread, error) {
	var c *khaladb.ThreadChange
	err := e.store.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		if may != nil {
			if err := may(v); err != nil {
				return nil, err
			}
		}
		var err error
		c, err = CancelChange(v, agent, e.now())
		return c, err
	})
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown thread %q", id)
	}
	if err != nil {
		return khaladb.Thread{}, err
	}
	e.changed(c)
	return c.Thread, nil
}
