package khala

import (
	"sync"
	"time"
)

// agentCache keeps agents by token hash. An agent is never changed once
// enrolled, so a cached one is as good as the stored one; entries expire
// anyway, so that a future revocation needs only a shorter TTL.
type agentCache struct {
	mu sync.Mutex
	m  map[Hash]cachedAgent
}

type cachedAgent struct {
	a  Agent
	at time.Time
}

const agentCacheTTL = time.Minute

func (c *agentCache) get(h Hash) (Agent, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[h]
	if !ok || time.Since(e.at) > agentCacheTTL {
		return Agent{}, false
	}
	return e.a, true
}

func (c *agentCache) put(h Hash, a Agent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedThreads {
		clear(c.m)
	}
	c.m[h] = cachedAgent{a: a, at: time.Now()}
}
