package shared

import (
	"sync"

	"github.com/nerve-agents/nerve/workflow"
)

// Messages keeps decoded messages per thread number. A message is written
// once and never changed, so a cached one is as good as the stored one,
// and a long thread's view costs a key walk (bbolt) or the bodies the
// replica has not seen (PostgreSQL) instead of decoding its history. The
// zero value is ready to use.
type Messages struct {
	mu sync.Mutex
	m  map[uint64][]workflow.Message
}

// Get returns thread n's cached messages, in step order. Callers must not
// change them.
func (c *Messages) Get(n uint64) []workflow.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[n]
}

// Put keeps msgs, all of thread n's messages in step order. The caller
// clips msgs so that an append to them does not write into the cache.
func (c *Messages) Put(n uint64, msgs []workflow.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= MaxThreads {
		c.m = map[uint64][]workflow.Message{}
	}
	c.m[n] = msgs
}
