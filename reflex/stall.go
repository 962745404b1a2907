package reflex

import (
	"sync"
	"sync/atomic"
	"time"
)

// stallWatch raises a stall when a running adapter prints nothing for
// after: once per silence, again only after output resumed and stopped
// anew. It is a timer, not a goroutine: a turn that prints costs one
// atomic store per line, and the timer fires at most once per after.
type stallWatch struct {
	after time.Duration
	start time.Time    // monotonic base of last
	last  atomic.Int64 // time since start of the last output

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	raised  int64 // the last output a stall was raised for; -1 none
	raise   func(quiet time.Duration)
	raising sync.Mutex // held while raising: one raise at a time
}

func watchStall(after time.Duration, raise func(quiet time.Duration)) *stallWatch {
	w := &stallWatch{after: after, start: time.Now(), raised: -1, raise: raise}
	w.mu.Lock()
	w.timer = time.AfterFunc(after, w.check)
	w.mu.Unlock()
	return w
}

// output notes that the adapter printed a line.
func (w *stallWatch) output() { w.last.Store(int64(time.Since(w.start))) }

func (w *stallWatch) check() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	last := w.last.Load()
	quiet := time.Since(w.start) - time.Duration(last)
	next, raise := w.after-quiet, false
	if quiet >= w.after {
		next, raise = w.after, w.raised != last
		w.raised = last
	}
	w.timer.Reset(next)
	if !raise {
		w.mu.Unlock()
		return
	}
	// Taken before mu is let go, so stop cannot return before this raise
	// has ended.
	w.raising.Lock()
	defer w.raising.Unlock()
	w.mu.Unlock()
	w.raise(quiet)
}

// stop ends the watch. A stall being raised is waited for, so none is
// raised after stop returns: a remote turn's detection reaches the trace
// before its answer.
func (w *stallWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
	w.raising.Lock() // wait for a raise under way
	w.raising.Unlock()
}
