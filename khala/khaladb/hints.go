package khaladb

import "sync"

// Hints broadcasts wake-ups by topic: Wait returns a channel that the next
// Notify of that topic closes. Taking the channel before reading state and
// waiting on it after means a change in between is never missed.
//
// Closing one channel wakes every waiter at once; with agents counted in
// dozens that herd is cheaper than per-waiter bookkeeping, and the losers
// of a claim go back to waiting after one read.
type Hints struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
}

// NewHints returns an empty Hints. Backends implement Storage.Changed with
// one.
func NewHints() *Hints { return &Hints{chans: map[string]chan struct{}{}} }

// Wait returns the channel the next Notify(topic) closes.
func (h *Hints) Wait(topic string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chans[topic]
	if !ok {
		c = make(chan struct{})
		h.chans[topic] = c
	}
	return c
}

// Notify wakes the waiters of topic. Topics nobody waits on cost nothing.
func (h *Hints) Notify(topics ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range topics {
		if c, ok := h.chans[t]; ok {
			close(c)
			delete(h.chans, t)
		}
	}
}

// NotifyAll wakes every waiter, whatever its topic: what changed while
// nobody could tell is unknown, so everyone looks.
func (h *Hints) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t, c := range h.chans {
		close(c)
		delete(h.chans, t)
	}
}
