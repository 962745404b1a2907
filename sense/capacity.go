package sense

import (
	"context"
	"sync"
)

// Capacity is the daemon's free turn slots (agent.max_concurrent_turns),
// shared by every khala sense: a sense claims only into free slots.
type Capacity struct {
	mu      sync.Mutex
	max     int
	used    int
	changed chan struct{} // closed and replaced on every release or resize
}

// NewCapacity returns max free slots.
func NewCapacity(max int) *Capacity {
	return &Capacity{max: max, changed: make(chan struct{})}
}

// Acquire takes up to n free slots, waiting until at least one is free or
// ctx is done; it returns how many it took.
func (c *Capacity) Acquire(ctx context.Context, n int) (int, error) {
	for {
		c.mu.Lock()
		if free := c.max - c.used; free > 0 {
			got := min(n, free)
			c.used += got
			c.mu.Unlock()
			return got, nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-ch:
		}
	}
}

// Release gives back n slots.
func (c *Capacity) Release(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.used -= n
	if c.used < 0 {
		c.used = 0
	}
	c.wake()
	c.mu.Unlock()
}

// SetMax changes the number of slots (hot reload). Running turns keep
// theirs; a smaller max just claims nothing until enough end.
func (c *Capacity) SetMax(max int) {
	c.mu.Lock()
	c.max = max
	c.wake()
	c.mu.Unlock()
}

// Used and Max report the slots in use and in all.
func (c *Capacity) Used() (used, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.max
}

func (c *Capacity) wake() {
	close(c.changed)
	c.changed = make(chan struct{})
}
