package engine

import (
	"sync"

	"github.com/nerve-agents/nerve/workflow"
)

// maxThreadDocs bounds the threads whose moderator documents are kept.
const maxThreadDocs = 4096

// threadDocs keeps each thread's moderator documents between its turns
// (workflow.DocCache), so routing an answer costs the new message, not a
// rebuild of the whole history: without it a thread of n turns costs n²
// conversions. Each entry is checked against the message it was built
// from, so a replica's cache never needs telling what another wrote.
type threadDocs struct {
	mu sync.Mutex
	m  map[string]*lockedDocs
}

type lockedDocs struct {
	mu    sync.Mutex
	cache workflow.DocCache
}

// acquire returns the thread's cache, held until release is called.
func (t *threadDocs) acquire(thread string) (cache *workflow.DocCache, release func()) {
	t.mu.Lock()
	d := t.m[thread]
	if d == nil {
		if t.m == nil || len(t.m) >= maxThreadDocs {
			t.m = map[string]*lockedDocs{} // whoever holds an old entry keeps it
		}
		d = &lockedDocs{}
		t.m[thread] = d
	}
	t.mu.Unlock()
	d.mu.Lock()
	return &d.cache, d.mu.Unlock
}
