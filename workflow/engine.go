package workflow

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
)

// Update is one durable transition of a thread: the thread record, the
// messages it gained and the events it raised, written in one transaction.
type Update struct {
	Thread   *Thread
	Messages []Message
	Events   []Event
}

// Store keeps a local thread durable as it moves: when Commit returns, the
// whole update is on disk. Storing a message's step twice keeps one.
type Store interface {
	Commit(u Update) error
	Messages(thread string) ([]Message, error)
}

// TurnFunc runs one turn and returns its message. A failed turn is a
// message with Error set, for the moderator to judge; only a cancelled ctx
// makes the result meaningless, and then the message is not stored.
type TurnFunc func(ctx context.Context, t *Thread, d *Definition, turn Turn, history []Message) Message

// Engine drives local threads: it asks the moderator, records the turns it
// assigns before running them, runs them (in parallel when it asked for
// several), stores each answer, and asks again until the thread ends.
//
// Each answered turn costs one transaction: the last answer of a round is
// committed together with the moderator's next decision. An Engine drives
// one thread at a time (it caches that thread's moderator documents).
type Engine struct {
	Store Store
	Turn  TurnFunc
	// Agent names this machine in messages and events.
	Agent string
	// Now is the clock (tests may fix it).
	Now func() time.Time

	docs DocCache
}

// ErrCancelled ends a thread the user cancelled; pass it as the cause of
// the context given to Run.
var ErrCancelled = errors.New("thread cancelled")

// Run moves t until it ends or ctx is done. When ctx ends with the cause
// ErrCancelled the thread is marked cancelled; on any other end of ctx
// (shutdown) it stays running with its pending turns recorded, so Run can
// resume it later at the interrupted turn.
func (e *Engine) Run(ctx context.Context, d *Definition, t *Thread) error {
	msgs, err := e.Store.Messages(t.ID)
	if err != nil {
		return err
	}
	if allAnswered(t.Pending, msgs) {
		u, err := e.route(ctx, d, t, msgs, nil)
		if err != nil {
			return e.stopped(ctx, t, err)
		}
		if err := e.commit(u); err != nil {
			return err
		}
	}
	for !t.Ended() {
		fresh, last, err := e.runPending(ctx, d, t, msgs)
		if err != nil {
			return e.stopped(ctx, t, err)
		}
		msgs = append(msgs, fresh...)
		msgs = append(msgs, last)
		sortByStep(msgs)
		u, err := e.route(ctx, d, t, msgs, &last)
		if err != nil {
			// Keep the answer even when routing is interrupted.
			if cerr := e.commit(Update{Thread: t, Messages: []Message{last}, Events: []Event{e.answered(t, last)}}); cerr != nil {
				return cerr
			}
			return e.stopped(ctx, t, err)
		}
		if err := e.commit(u); err != nil {
			return err
		}
	}
	return nil
}

// stopped turns an interruption into the thread's outcome.
func (e *Engine) stopped(ctx context.Context, t *Thread, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrCancelled) {
		return e.commit(e.end(t, StatusCancelled, nil, "cancelled by user"))
	}
	return err
}

// runPending runs the turns not yet answered. Every answer but the last to
// arrive is committed as it comes, so a crash never repeats finished work;
// the last is returned to be committed with the next decision.
func (e *Engine) runPending(ctx context.Context, d *Definition, t *Thread, msgs []Message) ([]Message, Message, error) {
	done := map[int]bool{}
	for _, m := range msgs {
		done[m.Step] = true
	}
	var todo []Turn
	for _, turn := range t.Pending {
		if !done[turn.Step] {
			todo = append(todo, turn)
		}
	}
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		fresh     []Message
		last      Message
		remaining = len(todo)
		firstErr  error
	)
	for _, turn := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := e.Turn(ctx, t, d, turn, msgs)
			if ctx.Err() != nil {
				return // not stored: the turn runs again on resume
			}
			m.Step, m.Role, m.Instruction = turn.Step, turn.Role, turn.Instruction
			if m.Agent == "" {
				m.Agent = e.Agent
			}
			if m.At.IsZero() {
				m.At = e.now()
			}
			mu.Lock()
			defer mu.Unlock()
			remaining--
			if remaining == 0 {
				last = m
				return
			}
			fresh = append(fresh, m)
			if err := e.commit(Update{Thread: t, Messages: []Message{m}, Events: []Event{e.answered(t, m)}}); err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, Message{}, ctx.Err()
	}
	return fresh, last, firstErr
}

// route asks the moderator what follows msgs and returns the update that
// records it; answered, when set, is stored in the same transaction.
func (e *Engine) route(ctx context.Context, d *Definition, t *Thread, msgs []Message, answered *Message) (Update, error) {
	dec, err := Route(ctx, d, NewState(t, msgs).WithCache(&e.docs))
	var re *RoutingError
	var u Update
	switch {
	case errors.As(err, &re):
		u = e.end(t, StatusFailed, nil, re.Error())
	case err != nil:
		return Update{}, err
	case dec.Fail != "":
		u = e.end(t, StatusFailed, nil, dec.Fail)
	case dec.Done:
		u = e.end(t, StatusCompleted, dec.ResultFor(msgs), "")
	default:
		// The assigned turns are on disk before any of them starts, so a
		// crash resumes exactly these.
		t.Pending = dec.Turns
		t.Step += len(dec.Turns)
		u = Update{Thread: t}
		for _, turn := range dec.Turns {
			u.Events = append(u.Events, Event{Type: EventTurnStarted, Thread: t.ID, Step: turn.Step, Role: turn.Role,
				Adapter: d.Roles[turn.Role].Adapter, Agent: e.Agent, At: e.now()})
		}
	}
	if answered != nil {
		u.Messages = []Message{*answered}
		u.Events = append([]Event{e.answered(t, *answered)}, u.Events...)
	}
	return u, nil
}

func (e *Engine) answered(t *Thread, m Message) Event {
	ev := Event{Type: EventTurnAnswered, Thread: t.ID, Step: m.Step, Role: m.Role, Agent: m.Agent, Adapter: m.Adapter, At: e.now()}
	if m.Error != nil {
		ev.Type, ev.Message = EventTurnFailed, m.Error.Message
	}
	return ev
}

func (e *Engine) end(t *Thread, status string, result any, reason string) Update {
	t.Status, t.Result, t.Error, t.Pending = status, result, reason, nil
	t.EndedAt = e.now()
	return Update{Thread: t, Events: []Event{{Type: EventThreadEnded, Thread: t.ID, Status: status, Message: reason, At: e.now()}}}
}

func (e *Engine) commit(u Update) error {
	u.Thread.UpdatedAt = e.now()
	return e.Store.Commit(u)
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now().UTC()
}

// allAnswered reports whether every pending turn has a stored message (true
// when none are pending): then the moderator is asked next.
func allAnswered(pending []Turn, msgs []Message) bool {
	done := map[int]bool{}
	for _, m := range msgs {
		done[m.Step] = true
	}
	for _, turn := range pending {
		if !done[turn.Step] {
			return false
		}
	}
	return true
}

func sortByStep(msgs []Message) {
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].Step < msgs[j].Step })
}
