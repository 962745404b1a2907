package khalabolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync"

	"github.com/nerve-agents/nerve/khala/khaladb"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

// maxIndexedThreads bounds the threads whose event positions are kept.
const maxIndexedThreads = 1024

// eventIndex remembers, per thread, at which step each event is stored
// (events sit beside their steps, not in sequence order), so that a
// follower asking for the events after n reads just those instead of
// scanning the whole thread: an event stream over a long thread would
// otherwise cost n² reads. Positions are added once their transaction has
// committed (bolt's OnCommit), in sequence order; a thread is complete
// once a full scan has seen everything before the first recorded one.
type eventIndex struct {
	mu      sync.Mutex
	threads map[uint64]*eventSteps
}

// eventPos is where an event is stored: beside its step.
type eventPos struct {
	seq  uint64
	step int
}

type eventSteps struct {
	pos      []eventPos // by seq, ascending
	complete bool       // pos holds every event of the thread
}

// committed records the positions of events a transaction stored, after
// it committed (and before anyone is told of them). A thread nobody has
// asked about has no entry and needs none: the scan that makes one sees
// every event committed before it.
func (x *eventIndex) committed(n uint64, pos []eventPos) {
	x.mu.Lock()
	defer x.mu.Unlock()
	t := x.threads[n]
	if t == nil {
		return
	}
	for _, p := range pos {
		if len(t.pos) == 0 || p.seq > t.pos[len(t.pos)-1].seq {
			t.pos = append(t.pos, p)
		}
	}
}

// after returns the positions of the thread's events after seq, or false
// when the index does not know them all.
func (x *eventIndex) after(n, seq uint64) ([]eventPos, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	t := x.threads[n]
	if t == nil || !t.complete {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(t.pos, seq+1, func(p eventPos, s uint64) int { return cmp.Compare(p.seq, s) })
	return slices.Clone(t.pos[i:]), true
}

// entry returns the thread's positions, made (empty) when absent. An
// entry made before a scan's transaction begins receives every commit
// after it, so the scan can complete it.
func (x *eventIndex) entry(n uint64) *eventSteps {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.threads == nil || len(x.threads) >= maxIndexedThreads {
		x.threads = map[uint64]*eventSteps{}
	}
	t := x.threads[n]
	if t == nil {
		t = &eventSteps{}
		x.threads[n] = t
	}
	return t
}

// scanned completes t, the thread's entry taken before the scan began,
// with the scan's positions (the events committed when it began): those
// recorded since are newer or the same. An entry the index dropped
// meanwhile is left alone.
func (x *eventIndex) scanned(n uint64, t *eventSteps, pos []eventPos) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.threads[n] != t || t.complete {
		return
	}
	all := append(pos, t.pos...)
	slices.SortFunc(all, func(a, b eventPos) int { return cmp.Compare(a.seq, b.seq) })
	t.pos = slices.CompactFunc(all, func(a, b eventPos) bool { return a.seq == b.seq })
	t.complete = true
}

// Events implements Storage.
func (b *Store) Events(ctx context.Context, thread string, after uint64, limit int) ([]workflow.Event, error) {
	n, ok := khaladb.ParseThreadID(thread)
	if !ok {
		return nil, khaladb.ErrNotFound
	}
	// Positions are read before the transaction begins: every one of
	// them was committed by then, so each is there to read.
	pos, indexed := b.events.after(n, after)
	var entry *eventSteps
	if !indexed {
		entry = b.events.entry(n)
	}
	var out []workflow.Event
	err := b.view(ctx, func(tx *bolt.Tx) error {
		threads := tx.Bucket(bThreads)
		if indexed {
			for _, p := range pos {
				if limit > 0 && len(out) == limit {
					break
				}
				e, err := decodeEvent(threads.Get(stepKey(n, p.step, p.seq)), p.seq)
				if err != nil {
					return err
				}
				out = append(out, e)
			}
			return nil
		}
		var all []eventPos
		prefix := append(k8(n), regionSteps)
		c := threads.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			seq := binary.BigEndian.Uint64(k[13:])
			if seq == 0 {
				continue // a turn
			}
			all = append(all, eventPos{seq: seq, step: int(binary.BigEndian.Uint32(k[9:13]))})
			if seq <= after {
				continue // an event already seen
			}
			e, err := decodeEvent(v, seq)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		if threads.Get(threadKey(n)) != nil {
			b.events.scanned(n, entry, all)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b workflow.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

func decodeEvent(v []byte, seq uint64) (workflow.Event, error) {
	var e workflow.Event
	if v == nil {
		return e, errBadRecord
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return e, err
	}
	e.Seq = seq // numbered when stored
	return e, nil
}
