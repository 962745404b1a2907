package engine

import (
	"slices"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/workflow"
)

// handoffs give a turn, in the commit that queues it, to an agent already
// waiting for one in a long poll: the answer that routes a thread also
// claims its next turn, so a thread whose agents wait moves at one commit
// per turn instead of two, and the claim costs no second fsync. Only the
// waiters of this process are seen; agents polling other replicas find a
// turn nobody here waits for by the usual claim. The waiters are wake-up
// state, nothing more: what is handed over is what was committed.
type handoffs struct {
	mu      sync.Mutex
	waiting []*waiter // oldest first
	// bare holds threads known to have no workspace, so a claim of their
	// turns reads nothing to say so. Whether a thread has a workspace is
	// fixed when it starts, so what any replica saw holds on every one.
	bare map[string]bool
}

// maxBare bounds the threads remembered as having no workspace.
const maxBare = 1 << 14

// noteBare records whether thread has no workspace; h.mu is held.
func (h *handoffs) noteBare(thread string, bare bool) {
	if !bare {
		return
	}
	if h.bare == nil || len(h.bare) >= maxBare {
		h.bare = map[string]bool{}
	}
	h.bare[thread] = true
}

// isBare reports whether thread is known to have no workspace.
func (h *handoffs) isBare(thread string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bare[thread]
}

// sawBare records a thread read without a workspace.
func (h *handoffs) sawBare(thread string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noteBare(thread, true)
}

// waiter is one long poll between two looks at the queue.
type waiter struct {
	q khaladb.ClaimQuery
	// got receives exactly once from whoever took the waiter off the
	// list: the turns committed for it, or nil when the commit failed.
	got chan []khaladb.Turn
	// ws holds the workspace of each thread whose turns were handed over,
	// taken from the change that queued them (no read to find it); it is
	// written before got is sent on.
	ws map[string]threadWS
}

// park adds a long poll that found nothing to the waiting list.
func (h *handoffs) park(q khaladb.ClaimQuery) *waiter {
	w := &waiter{q: q, got: make(chan []khaladb.Turn, 1)}
	h.mu.Lock()
	h.waiting = append(h.waiting, w)
	h.mu.Unlock()
	return w
}

// parked counts the long polls waiting (khala_claims_waiting), which is
// also what tests wait on before they queue a turn for a poll.
func (h *handoffs) parked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// leave takes w off the list. When a handoff took it first, it waits for
// that handoff's outcome (its commit is under way) and returns the turns.
func (h *handoffs) leave(w *waiter) []khaladb.Turn {
	h.mu.Lock()
	if i := slices.Index(h.waiting, w); i >= 0 {
		h.waiting = slices.Delete(h.waiting, i, i+1)
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	return <-w.got
}

// reservation is what one change promised to which waiters.
type reservation struct {
	order []*waiter
	turns map[*waiter][]khaladb.Turn
}

// reserve claims c's queued turns for waiting agents whose filters take
// them, oldest waiter first and up to each one's max: such a turn is
// written claimed (with its turn.started event) instead of queued. The
// caller settles the reservation once it knows whether c was committed.
func (h *handoffs) reserve(c *khaladb.ThreadChange, now time.Time) *reservation {
	if c == nil {
		return nil
	}
	var r *reservation
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noteBare(c.Thread.ID, c.Thread.Workspace == nil)
	for i := range c.Turns {
		t := &c.Turns[i]
		if t.State != khaladb.TurnQueued || len(h.waiting) == 0 && r == nil {
			continue
		}
		w := r.taker(t)
		if w == nil {
			j := slices.IndexFunc(h.waiting, func(w *waiter) bool { return takes(&w.q, t) })
			if j < 0 {
				continue
			}
			w = h.waiting[j]
			h.waiting = slices.Delete(h.waiting, j, j+1)
			if r == nil {
				r = &reservation{turns: map[*waiter][]khaladb.Turn{}}
			}
			r.order = append(r.order, w)
		}
		t.State, t.Claim, t.Agent = khaladb.TurnClaimed, khaladb.NewClaimID(), w.q.Agent
		t.ClaimedAt, t.LeaseExpires, t.IdleAt = now, now.Add(t.Lease), time.Time{}
		c.Events = append(c.Events, workflow.Event{At: now, Type: workflow.EventTurnStarted, Thread: t.Thread,
			Step: t.Step, Role: t.Role, Agent: t.Agent, Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt})
		r.turns[w] = append(r.turns[w], *t)
		if w.ws == nil {
			w.ws = map[string]threadWS{}
		}
		// nil too: no read for a thread without one
		w.ws[t.Thread] = threadWS{ws: c.Thread.Workspace, round: c.Thread.Round}
	}
	return r
}

// taker returns a waiter of r that takes t and has room for it.
func (r *reservation) taker(t *khaladb.Turn) *waiter {
	if r == nil {
		return nil
	}
	for _, w := range r.order {
		if len(r.turns[w]) < w.q.Max && takes(&w.q, t) {
			return w
		}
	}
	return nil
}

// settle tells each waiter of r what it got: its turns once the change is
// committed, else nothing (it then looks at the queue again).
func (r *reservation) settle(committed bool) {
	if r == nil {
		return
	}
	for _, w := range r.order {
		if committed {
			w.got <- r.turns[w]
		} else {
			w.got <- nil
		}
	}
}

// takes reports whether a claim with q's filters may get t.
func takes(q *khaladb.ClaimQuery, t *khaladb.Turn) bool {
	return (len(q.Workflows) == 0 || slices.Contains(q.Workflows, t.Workflow)) &&
		(len(q.Roles) == 0 || slices.Contains(q.Roles, t.Role) || t.Role == khaladb.MergeRole) &&
		q.Repos.Admits(t.Repo, t.RepoDeclared)
}
