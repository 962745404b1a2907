package khala

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync"

	"github.com/nerve-agents/nerve/workflow"
	bolt "go.etcd.io/bbolt"
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

type eventSteps struct {
	seqs     []uint64 // ascending
	steps    []int
	complete bool // seqs holds every event of the thread
}

// committed records the positions of events a transaction stored, after
// it committed (and before anyone is told of them). A thread nobody has
// asked about has no entry and needs none: the scan that makes one sees
// every event committed before it.
func (x *eventIndex) committed(n uint64, seqs []uint64, steps []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	t := x.threads[n]
	if t == nil {
		return
	}
	for i, seq := range seqs {
		if len(t.seqs) > 0 && seq <= t.seqs[len(t.seqs)-1] {
			continue
		}
		t.seqs, t.steps = append(t.seqs, seq), append(t.steps, steps[i])
	}
}

// after returns the positions of the thread's events after seq, or false
// when the index does not know them all.
func (x *eventIndex) after(n, seq uint64) (seqs []uint64, steps []int, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	t := x.threads[n]
	if t == nil || !t.complete {
		return nil, nil, false
	}
	i, _ := slices.BinarySearch(t.seqs, seq+1)
	return slices.Clone(t.seqs[i:]), slices.Clone(t.steps[i:]), true
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
// with the scan's positions (the events committed when it began). An
// entry the index dropped meanwhile is left alone.
func (x *eventIndex) scanned(n uint64, t *eventSteps, seqs []uint64, steps []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.threads[n] != t || t.complete {
		return
	}
	// Positions recorded since are newer than the scan's or the same.
	var mseqs []uint64
	var msteps []int
	i, j := 0, 0
	for i < len(seqs) || j < len(t.seqs) {
		switch {
		case j == len(t.seqs) || i < len(seqs) && seqs[i] < t.seqs[j]:
			mseqs, msteps = append(mseqs, seqs[i]), append(msteps, steps[i])
			i++
		case i == len(seqs) || t.seqs[j] < seqs[i]:
			mseqs, msteps = append(mseqs, t.seqs[j]), append(msteps, t.steps[j])
			j++
		default:
			mseqs, msteps = append(mseqs, seqs[i]), append(msteps, steps[i])
			i, j = i+1, j+1
		}
	}
	t.seqs, t.steps, t.complete = mseqs, msteps, true
}

// Events implements Storage.
func (b *Bolt) Events(ctx context.Context, thread string, after uint64, limit int) ([]workflow.Event, error) {
	n, ok := ParseThreadID(thread)
	if !ok {
		return nil, ErrNotFound
	}
	// Positions are read before the transaction begins: every one of
	// them was committed by then, so each is there to read.
	seqs, steps, indexed := b.events.after(n, after)
	var entry *eventSteps
	if !indexed {
		entry = b.events.entry(n)
	}
	var out []workflow.Event
	err := b.view(ctx, func(tx *bolt.Tx) error {
		threads := tx.Bucket(bThreads)
		if indexed {
			for i, seq := range seqs {
				if limit > 0 && len(out) == limit {
					break
				}
				e, err := decodeEvent(threads.Get(stepKey(n, steps[i], seq)), seq)
				if err != nil {
					return err
				}
				out = append(out, e)
			}
			return nil
		}
		var all []uint64
		var allSteps []int
		prefix := append(k8(n), regionSteps)
		c := threads.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			seq := binary.BigEndian.Uint64(k[13:])
			if seq == 0 {
				continue // a turn
			}
			all, allSteps = append(all, seq), append(allSteps, int(binary.BigEndian.Uint32(k[9:13])))
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
			idx := make([]int, len(all))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(i, j int) int { return cmp.Compare(all[i], all[j]) })
			sseqs, ssteps := make([]uint64, len(all)), make([]int, len(all))
			for i, k := range idx {
				sseqs[i], ssteps[i] = all[k], allSteps[k]
			}
			b.events.scanned(n, entry, sseqs, ssteps)
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
