package khalapg

import (
	"sync"
	"testing"
	"time"
)

// underWay makes calls 0..n-1 of key (call i makes the i-th) come while a
// run of key is under way, each in its own goroutine, then ends that run
// and returns once they have returned: they share the next run.
func underWay[Q, R any](t testing.TB, g *batcher[Q, R], key string, n int, call func(i int)) {
	t.Helper()
	g.mu.Lock()
	if g.running == nil {
		g.running = map[string]*batch[Q, R]{}
	}
	g.running[key] = nil // as if a run were under way
	g.mu.Unlock()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
		// One at a time, so the batch holds them in this order.
		for deadline := time.Now().Add(10 * time.Second); ; {
			g.mu.Lock()
			joined := 0
			if b := g.running[key]; b != nil {
				joined = len(b.qs)
			}
			g.mu.Unlock()
			if joined == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %d did not join the batch", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	g.ran(key) // the run under way ends: the batch runs
	wg.Wait()
}
