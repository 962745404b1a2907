package daemon

import (
	"context"
	"sync"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// maxCachedThreads bounds the remote histories kept between turns.
const maxCachedThreads = 64

// histories caches remote threads' messages between their turns, so each
// turn fetches only what is new (since the last message it saw) rather
// than the whole thread: a long thread would otherwise cost a growing
// download per turn.
type histories struct {
	mu    sync.Mutex
	order []string
	msgs  map[string][]workflow.Message
	// evicted is called with a key dropped from the cache (its snapshot
	// file goes with it).
	evicted func(key string)
}

func newHistories(evicted func(string)) *histories {
	return &histories{msgs: map[string][]workflow.Message{}, evicted: evicted}
}

// get returns the thread's messages, in step order.
func (h *histories) get(ctx context.Context, cl *remote.Client, key, thread string) ([]workflow.Message, error) {
	h.mu.Lock()
	have := h.msgs[key]
	h.mu.Unlock()
	var f workflow.Filter
	if n := len(have); n > 0 {
		f.Since = have[n-1].At
	}
	fresh, err := cl.Messages(ctx, thread, f)
	if err != nil {
		return have, err
	}
	merged := mergeSteps(have, fresh)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.msgs[key]; !ok {
		h.order = append(h.order, key)
		if len(h.order) > maxCachedThreads {
			old := h.order[0]
			delete(h.msgs, old)
			h.order = h.order[1:]
			if h.evicted != nil {
				h.evicted(old)
			}
		}
	}
	h.msgs[key] = merged
	return merged, nil
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
