package khalabolt

import (
	"sync"

	"github.com/nerve-agents/nerve/khala/khaladb"

	bolt "go.etcd.io/bbolt"
)

// maxBatch bounds one group commit, so one transaction stays short.
const maxBatch = 256

// writer commits write requests in groups: requests that arrive while a
// commit is on disk wait and go together into the next one, so one pair
// of fsyncs covers many agents' claims and answers. There is no writer
// goroutine: the first request to find no commit running commits itself,
// and hands the lead to the oldest waiting request when it is done. A
// lone request so never waits for a batch, nor for a goroutine to wake.
type writer struct {
	db *bolt.DB

	mu      sync.Mutex
	pending []*boltOp
	leading bool
	closed  bool
	busy    sync.WaitGroup // requests accepted and not yet answered
}

type boltOp struct {
	fn   func(tx *bolt.Tx) error
	err  chan error    // the outcome, once committed (or not)
	lead chan struct{} // this request is to commit the next batch
}

func (w *writer) update(fn func(tx *bolt.Tx) error) error {
	op := &boltOp{fn: fn, err: make(chan error, 1), lead: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return khaladb.ErrClosed
	}
	w.busy.Add(1)
	defer w.busy.Done()
	w.pending = append(w.pending, op)
	if w.leading {
		w.mu.Unlock()
		// Wait even if the caller gives up: the commit may still happen,
		// and nobody may be told "done" before it has.
		select {
		case err := <-op.err:
			return err
		case <-op.lead:
		}
	} else {
		w.leading = true
		w.mu.Unlock()
	}
	w.mu.Lock()
	n := min(len(w.pending), maxBatch)
	batch := w.pending[:n:n]
	w.pending = w.pending[n:]
	w.mu.Unlock()
	w.commit(batch) // op is in it: the oldest waiting request
	w.mu.Lock()
	if len(w.pending) > 0 {
		w.pending[0].lead <- struct{}{}
	} else {
		w.leading = false
	}
	w.mu.Unlock()
	return <-op.err
}

func (w *writer) commit(batch []*boltOp) {
	err := w.db.Update(func(tx *bolt.Tx) error {
		for _, op := range batch {
			if err := op.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(batch) == 1 {
		for _, op := range batch {
			op.err <- err
		}
		return
	}
	// One request broke the transaction: run each alone so only it fails.
	for _, op := range batch {
		op.err <- w.db.Update(op.fn)
	}
}

func (w *writer) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// close refuses new requests and waits for the accepted ones; it reports
// false if the writer was already closed.
func (w *writer) close() bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.closed = true
	w.mu.Unlock()
	w.busy.Wait()
	return true
}
