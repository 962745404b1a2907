package engine

import "github.com/nerve-agents/nerve/khala/khaladb"

// withPriority gives a new thread's change priority p: the thread keeps
// it, and every turn it queues carries it (queueTurns copies it), so the
// queue's index orders turns without reading their threads.
func withPriority(c *khaladb.ThreadChange, p int) {
	c.Thread.Priority = p
	for i := range c.Turns {
		c.Turns[i].Priority = p
	}
}
