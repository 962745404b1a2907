package workflow

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
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
	// Commit writes u durably; it may count more in u.Thread.Usage: what
	// children an agent started spent (ChildSpend).
	Commit(u Update) error
	Messages(thread string) ([]Message, error)
	// ChildSpend is what thread's children started by its agents (not
	// waited for by a step) spent since its last Commit, which counts it.
	ChildSpend(thread string) (usage.Totals, error)
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
	// Merge, when set, merges a round of parallel turns of a thread with a
	// workspace into its branch (see MergeFunc). Without it the branch's
	// head stays where the round started.
	Merge MergeFunc

	docs DocCache
}

// MergeFunc merges the work of a round of parallel turns into the thread
// branch when the last of them has answered, before the moderator is asked
// what follows. round holds the round's messages in step order (each with
// the Commit of its own worktree, when its turn committed); t.Workspace.Head
// is the head every turn of the round started from.
//
// It merges each commit into the branch in step order, and returns the
// branch's new head ("" or the old head: unchanged). On a conflict it
// leaves the branch at the last clean merge, sets round[i].Error to
// {Kind: ErrorKindMerge, Message: the conflicting files} on the message
// whose merge failed, and goes on or stops as it sees fit; any other
// failure is {Kind: ErrorKindWorkspace} on the message concerned. It may
// change round's messages only through Error, Commit and Changes; the
// engine stores them again with the round's last answer, so the moderator
// and the store see what it set.
//
// It must be idempotent: after a crash between the merge and the commit
// of the round's last answer, the last turn runs again and Merge is called
// again with the same round (each commit already merged is then a no-op).
// It does not run when ctx is done; an error it cannot put on a message
// is for the caller to turn into one.
type MergeFunc func(ctx context.Context, t *Thread, round []Message) (head string)

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
	sortByStep(msgs) // kept so: answeredSteps reads only its end
	t.RecountUsage(msgs)
	if allAnswered(t.Pending, msgs) {
		// A round whose last answer is stored but not routed (routing was
		// interrupted) is settled again: Merge is idempotent.
		redo := e.settle(ctx, t, msgs)
		if ctx.Err() != nil {
			return e.stopped(ctx, t, ctx.Err())
		}
		u, err := e.route(ctx, d, t, msgs, nil)
		if err != nil {
			return e.stopped(ctx, t, err)
		}
		u.Messages = append(redo, u.Messages...)
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
		answer, startWS := last, t.Workspace
		redo := e.settle(ctx, t, msgs)
		if ctx.Err() != nil {
			return e.stopped(ctx, t, ctx.Err()) // the last answer runs again on resume
		}
		if i := slices.IndexFunc(msgs, func(m Message) bool { return m.Step == last.Step }); i >= 0 {
			last = msgs[i]
		}
		redo = slices.DeleteFunc(redo, func(m Message) bool { return m.Step == last.Step })
		u, err := e.route(ctx, d, t, msgs, &last)
		if err != nil {
			// Keep the answer even when routing is interrupted, as it came:
			// the round is settled again, from where it started, on resume.
			t.Workspace = startWS
			if cerr := e.commit(Update{Thread: t, Messages: []Message{answer}, Events: []Event{e.answered(t, answer)}}); cerr != nil {
				return cerr
			}
			return e.stopped(ctx, t, err)
		}
		u.Messages = append(redo, u.Messages...)
		if err := e.commit(u); err != nil {
			return err
		}
	}
	return nil
}

// settle moves the thread's workspace head after a round has answered (msgs:
// the thread's messages in step order, the round's among them): to the
// commit of a single turn, or to what Merge made of a parallel round. It
// returns the round's messages Merge changed, to be stored again, and
// updates them in msgs. Nothing happens for a thread without a workspace.
func (e *Engine) settle(ctx context.Context, t *Thread, msgs []Message) []Message {
	if t.Workspace == nil || len(t.Pending) == 0 {
		return nil
	}
	var idx []int
	for i, m := range msgs {
		if slices.ContainsFunc(t.Pending, func(p Turn) bool { return p.Step == m.Step }) {
			idx = append(idx, i)
		}
	}
	head := t.Workspace.Head
	var changed []Message
	switch {
	case len(idx) == 1:
		if c := msgs[idx[0]].Commit; c != "" {
			head = c
		}
	case len(idx) > 1 && e.Merge != nil:
		round := make([]Message, len(idx))
		for k, i := range idx {
			round[k] = msgs[i]
		}
		if h := e.Merge(ctx, t, round); h != "" {
			head = h
		}
		if ctx.Err() != nil {
			return nil
		}
		for k, i := range idx {
			if !sameWork(msgs[i], round[k]) {
				msgs[i] = round[k]
				changed = append(changed, round[k])
			}
		}
	}
	if head != t.Workspace.Head {
		ws := *t.Workspace // a copy: the old record may be shared
		ws.Head = head
		t.Workspace = &ws
	}
	return changed
}

// sameWork reports whether Merge left a message's error, commit and
// changes as they were.
func sameWork(a, b Message) bool {
	return a.Commit == b.Commit && ptrEqual(a.Changes, b.Changes) && ptrEqual(a.Error, b.Error)
}

func ptrEqual[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
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
	done := answeredSteps(t.Pending, msgs)
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
	run := func(turn Turn) {
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
		t.Usage.Add(m.Usage)
		if m.ChildUsage != nil {
			t.Usage.Merge(*m.ChildUsage)
		}
		remaining--
		if remaining == 0 {
			last = m
			return
		}
		fresh = append(fresh, m)
		if err := e.commit(Update{Thread: t, Messages: []Message{m}, Events: []Event{e.answered(t, m)}}); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	// The last turn runs in this goroutine: a thread's usual single turn
	// then costs no goroutine, nor the wake-up that hands its end back.
	for i, turn := range todo {
		if i == len(todo)-1 {
			run(turn)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(turn)
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
	var (
		dec Decision
		err error
		re  *RoutingError
		u   Update
	)
	refused := spawnRefused(t, msgs)
	if refused == "" {
		dec, err = e.routeWithin(ctx, d, t, NewState(t, msgs).WithCache(&e.docs))
	}
	switch {
	case refused != "":
		u = e.end(t, StatusFailed, nil, refused)
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
			u.Events = append(u.Events, startEvent(d, t, turn, e.Agent, e.now()))
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
	done := answeredSteps(pending, msgs)
	for _, turn := range pending {
		if !done[turn.Step] {
			return false
		}
	}
	return true
}

// answeredSteps is the set of steps of msgs (sorted by step) at or after
// the earliest pending turn's: the answers a pending turn may have. Only
// the end of msgs is read; the set holds a round's answers, not every step.
func answeredSteps(pending []Turn, msgs []Message) map[int]bool {
	done := make(map[int]bool, len(pending))
	if len(pending) == 0 {
		return done
	}
	low := pending[0].Step
	for _, t := range pending[1:] {
		low = min(low, t.Step)
	}
	for i := len(msgs) - 1; i >= 0 && msgs[i].Step >= low; i-- {
		done[msgs[i].Step] = true
	}
	return done
}

func sortByStep(msgs []Message) {
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].Step < msgs[j].Step })
}
