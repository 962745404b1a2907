package shared

import (
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// MaxThreads bounds every cache here (entries: threads, or agents); past
// it a cache starts over.
const MaxThreads = 4096

// Agents keeps agents by token hash. An agent is never changed once
// enrolled, so a cached one is as good as the stored one until it is
// revoked: a revoke clears the cache (on PostgreSQL, every replica's,
// through the revoke's NOTIFY). Entries expire anyway, the bound on a
// replica that missed one. The zero value is ready to use.
type Agents struct {
	mu sync.Mutex
	m  map[khaladb.Hash]cachedAgent
}

type cachedAgent struct {
	a  khaladb.Agent
	at time.Time
}

const agentTTL = time.Minute

// Get returns the agent whose token hashes to h, if cached and fresh.
func (c *Agents) Get(h khaladb.Hash) (khaladb.Agent, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	if !ok || time.Since(e.at) > agentTTL {
		return khaladb.Agent{}, false
	}
	return e.a, true
}

// Put caches a under h.
func (c *Agents) Put(h khaladb.Hash, a khaladb.Agent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= MaxThreads {
		c.m = map[khaladb.Hash]cachedAgent{}
	}
	c.m[h] = cachedAgent{a: a, at: time.Now()}
}

// Clear forgets every agent: one was revoked (revokes are rare, so
// forgetting all costs a lookup per agent once).
func (c *Agents) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
