package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// maxCachedThreads bounds the remote histories kept between turns.
const maxCachedThreads = 64

// histories caches remote threads' messages between their turns, so each
// turn fetches only what is new (since the last message it saw) rather
// than the whole thread: a long thread would otherwise cost a growing
// download per turn. A thread whose every earlier step is cached (this
// daemon answered the last one itself, say) costs no request at all.
type histories struct {
	mu      sync.Mutex
	order   []string
	threads map[string]*history
	// evicted is called with a key dropped from the cache (its snapshot
	// file goes with it).
	evicted func(key string)
}

// history is one thread's cached messages, in step order. since is the
// time of the last message a fetch returned: the next fetch asks for what
// came after it. Messages this daemon added itself do not move it, so a
// sibling answered elsewhere just before one of ours is still fetched.
type history struct {
	msgs  []workflow.Message
	since time.Time
}

func newHistories(evicted func(string)) *histories {
	return &histories{threads: map[string]*history{}, evicted: evicted}
}

// get returns the thread's messages before step, in step order (and any
// later ones a fetch returned).
func (h *histories) get(ctx context.Context, cl *remote.Client, key, thread string, step int) ([]workflow.Message, error) {
	h.mu.Lock()
	c := h.entry(key)
	have, since := c.msgs, c.since
	h.mu.Unlock()
	if step <= 1 || hasSteps(have, step-1) {
		return have, nil // nothing earlier is missing
	}
	fresh, err := cl.Messages(ctx, thread, workflow.Filter{Since: since})
	if err != nil {
		return have, err
	}
	for _, m := range fresh {
		if m.At.After(since) {
			since = m.At
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c = h.entry(key)
	c.msgs, c.since = mergeSteps(c.msgs, fresh), maxTime(c.since, since)
	return c.msgs, nil
}

// add records a message this daemon's answer made, when the thread's
// cache holds every step before it (else the next turn fetches anyway).
func (h *histories) add(key string, m workflow.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.threads[key]
	if c == nil || (m.Step > 1 && !hasSteps(c.msgs, m.Step-1)) {
		return
	}
	c.msgs = mergeSteps(c.msgs, []workflow.Message{m})
}

// entry returns key's cache entry, making room for a new one.
func (h *histories) entry(key string) *history {
	if c := h.threads[key]; c != nil {
		return c
	}
	h.order = append(h.order, key)
	if len(h.order) > maxCachedThreads {
		old := h.order[0]
		delete(h.threads, old)
		h.order = h.order[1:]
		if h.evicted != nil {
			h.evicted(old)
		}
	}
	c := &history{}
	h.threads[key] = c
	return c
}

// hasSteps reports whether msgs (in step order, one per step) begins with
// steps 1 to n.
func hasSteps(msgs []workflow.Message, n int) bool {
	if n < 1 || len(msgs) < n {
		return false
	}
	return msgs[0].Step == 1 && msgs[n-1].Step == n
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// mergeSteps adds fresh to have, one message per step, in step order.
func mergeSteps(have, fresh []workflow.Message) []workflow.Message {
	out := append([]workflow.Message(nil), have...)
	seen := make(map[int]bool, len(have))
	for _, m := range have {
		seen[m.Step] = true
	}
	for _, m := range fresh {
		if !seen[m.Step] {
			seen[m.Step] = true
			out = append(out, m)
		}
	}
	sortSteps(out)
	return out
}

func sortSteps(msgs []workflow.Message) {
	for i := 1; i < len(msgs); i++ {
		for j := i; j > 0 && msgs[j].Step < msgs[j-1].Step; j-- {
			msgs[j], msgs[j-1] = msgs[j-1], msgs[j]
		}
	}
}
