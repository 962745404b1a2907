package khala

import "sync"

// emptyQueue remembers that a claim of any workflow and role found no
// turn, by the queue hint taken before it. While that hint has not fired,
// nothing was queued since (every change that makes a turn claimable
// publishes it: a new or requeued turn, a lock a claim skipped being
// released), so a long poll parks at once instead of asking the database
// again. Each turn of a busy queue used to cost such an empty claim: the
// agent asks for its next turn before its answer has queued it.
//
// Over PostgreSQL a turn queued through another replica is known here
// only when its NOTIFY arrives (a few milliseconds): a poll arriving in
// between parks and is woken by it, as a poll already parked would be.
type emptyQueue struct {
	mu   sync.Mutex
	hint <-chan struct{}
}

// saw records that an unfiltered claim that began with hint found nothing.
func (e *emptyQueue) saw(hint <-chan struct{}) {
	e.mu.Lock()
	e.hint = hint
	e.mu.Unlock()
}

// empty reports whether the queue is known empty: hint, taken just now,
// is still the one an empty claim began with.
func (e *emptyQueue) empty(hint <-chan struct{}) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hint != nil && e.hint == hint
}
