package khalapg

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/nerve-agents/nerve/workflow"
)

// The answer's fast path. An answer is most often the next change of a
// thread whose open turn was claimed through the same replica a moment
// before, with nothing else happening in between. The claim reads, in its
// own snapshot, what that change needs: the thread's record and version,
// its messages' steps and its last message's body (queue.go). The
// answer then makes its change from that view and writes it in one
// statement, with no transaction around a locked read: two round trips
// and five statements fewer.
//
// The statement checks everything the view was made from: the thread's
// version (which every change moves, so no message came in between) and
// the revision of every turn it writes. A view that moved makes it stale,
// nothing is written, and the change is made again from a locked read
// (UpdateThread's usual way). So the view costs correctness nothing:
// a thread's changes still commit one at a time, each made from the state
// the one before left. A view is kept only when the claim holds every open
// turn of its thread (a sequential thread), or when a change hands every
// turn it leaves open to agents waiting on this replica (changed); it is
// used once.

// claimView is what a claim read of one thread.
type claimView struct {
	version int64
	pending []int32        // steps of the thread's open turns
	record  []byte         // the thread, JSON
	steps   []int32        // steps of its messages
	last    []byte         // the body of its last message; nil: none
	turns   []khaladb.Turn // this claim's turns of the thread, in step order
}

// MaxViewBody bounds the last message a claim's view keeps (a longer one
// is read when the view is used): a replica holds views of up to
// shared.MaxThreads threads.
const MaxViewBody = 16 << 10

// claimViews keeps the view of each thread whose open turns this replica
// handed out last (by a claim or a handoff), until the thread's next
// change takes it.
type claimViews struct {
	mu sync.Mutex
	m  map[uint64]*claimView

	fast, stale atomic.Int64 // changes written from a view, and views found stale
}

// claimed keeps the views of a claim's threads (one row per turn).
func (c *claimViews) claimed(rows []claimView) {
	byThread := map[uint64]*claimView{}
	var order []uint64
	for i := range rows {
		n, _ := pgThreadID(rows[i].turns[0].Thread)
		if v, ok := byThread[n]; ok {
			v.turns = append(v.turns, rows[i].turns[0])
			continue
		}
		byThread[n] = &rows[i]
		order = append(order, n)
	}
	for _, n := range order {
		v := byThread[n]
		if v.version == 0 || !holdsAll(v.turns, v.pending) {
			c.take(n) // other turns are open: their state is not in the view
			continue
		}
		if len(v.last) > MaxViewBody {
			v.last = nil // read when the view is used, not kept meanwhile
		}
		c.keep(n, v)
	}
}

// holdsAll reports whether turns are every open turn of a thread whose
// open turns are at steps (none: the thread has nothing to answer).
func holdsAll(turns []khaladb.Turn, steps []int32) bool {
	for _, s := range steps {
		if !slices.ContainsFunc(turns, func(t khaladb.Turn) bool { return t.Step == int(s) }) {
			return false
		}
	}
	return len(steps) > 0
}

// changed keeps the view change ch of thread n left (v: the view it was
// made from; st: its statement, with what it wrote) when the change handed
// every turn it left open to agents waiting on this replica (khala/engine/handoff.go):
// their answers are the thread's next changes. Its messages go to the
// message cache, where claimedView finds them. Turns and messages are kept
// as a read would return them.
func (c *claimViews) changed(p *Store, n uint64, v *khaladb.ThreadView, ch *khaladb.ThreadChange, st *changeStmt) {
	var handed []khaladb.Turn
	for _, t := range ch.Turns {
		if t.State == khaladb.TurnClaimed {
			handed = append(handed, storedTurn(t))
		}
	}
	if ch.Thread.Ended() || !holdsAll(handed, st.pending) {
		c.take(n) // a view this replica kept of the thread is stale now
		return
	}
	msgs := slices.Clip(v.Messages)
	for _, data := range st.messages {
		var stored workflow.Message
		if err := json.Unmarshal(data, &stored); err != nil {
			c.take(n)
			return
		}
		msgs = append(msgs, stored)
	}
	slices.SortStableFunc(msgs, func(a, b workflow.Message) int { return a.Step - b.Step })
	steps := make([]int32, len(msgs))
	for i, m := range msgs {
		steps[i] = int32(m.Step)
	}
	p.cacheMessages(n, msgs)
	c.keep(n, &claimView{version: int64(v.Thread.Version + 1), pending: st.pending, record: st.record, steps: steps, turns: handed})
}

// FastPathStats counts the answers written from a claim's view (Fast) and
// the views found stale when one was written (Stale), since the store was
// opened.
type FastPathStats struct{ Fast, Stale int64 }

// FastPathStats says how often the answer's fast path was taken.
func (p *Store) FastPathStats() FastPathStats {
	return FastPathStats{Fast: p.views.fast.Load(), Stale: p.views.stale.Load()}
}

// storedTurn is t as written (its next revision) and read back.
func storedTurn(t khaladb.Turn) khaladb.Turn {
	t.Rev++
	for _, at := range []*time.Time{&t.FirstQueued, &t.QueuedAt, &t.ClaimedAt, &t.LeaseExpires, &t.IdleAt} {
		*at = shared.FromNanos(shared.Nanos(*at))
	}
	return t
}

// keep keeps v as thread n's view; its turns must be all the thread's
// open ones (their state is in no other view).
func (c *claimViews) keep(n uint64, v *claimView) {
	slices.SortFunc(v.turns, func(a, b khaladb.Turn) int { return a.Step - b.Step })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= shared.MaxThreads {
		c.m = map[uint64]*claimView{}
	}
	c.m[n] = v
}

// heartbeat keeps a view's turn at the revision a heartbeat moved it to.
func (c *claimViews) heartbeat(n uint64, t khaladb.Turn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.m[n]
	if v == nil {
		return
	}
	for i := range v.turns {
		if v.turns[i].Step == t.Step && v.turns[i].Rev < t.Rev {
			v.turns[i] = t
		}
	}
}

// take removes and returns thread n's view, or nil.
func (c *claimViews) take(n uint64) *claimView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.m[n]
	delete(c.m, n)
	return v
}

// updateFast makes fn's change of thread n from the view its claim left,
// if there is one, and reports whether it did. false: make the change
// from a locked read, which also gives fn's refusals the final word (a
// claim the view does not know may be one made elsewhere since).
func (p *Store) updateFast(ctx context.Context, n uint64, fn func(*khaladb.ThreadView) (*khaladb.ThreadChange, error)) (bool, error) {
	cv := p.views.take(n)
	if cv == nil {
		return false, nil
	}
	v, err := p.claimedView(ctx, n, cv)
	if err != nil {
		return false, nil
	}
	c, err := fn(v)
	if err != nil || c == nil {
		return false, nil
	}
	st, err := changeStatement(n, c, v.Thread.Version)
	if err != nil {
		return true, err
	}
	if err := p.writeViewChange(ctx, &viewChange{n: n, version: v.Thread.Version, c: c, st: st}); err != nil {
		if ctx.Err() != nil {
			return true, p.fail("update thread", err)
		}
		// Stale (nothing was written), or failed: the locked read says
		// which, and reports what is wrong.
		p.views.stale.Add(1)
		return false, nil
	}
	p.views.fast.Add(1)
	p.views.changed(p, n, v, c, st)
	p.publishChange(c, v)
	return true, p.fail("", nil)
}

// claimedView is the thread's view as its claim read it: the record, the
// claim's turns, and the messages from this replica's cache, the claim's
// last body, and a read of any others.
func (p *Store) claimedView(ctx context.Context, n uint64, cv *claimView) (*khaladb.ThreadView, error) {
	pv := &pgView{}
	if err := json.Unmarshal(cv.record, &pv.Thread); err != nil {
		return nil, err
	}
	pv.Thread.Version = uint64(cv.version)
	pv.Turns = cv.turns
	cached := p.cachedMessages(n)
	i := 0
	for k, step := range cv.steps {
		var body []byte
		if k == len(cv.steps)-1 {
			body = cv.last
		}
		if err := pv.addMessage(n, step, body, cached, &i); err != nil {
			return nil, err
		}
	}
	if err := p.fillMessages(ctx, p.pool, n, pv); err != nil {
		return nil, err
	}
	return &pv.ThreadView, nil
}
