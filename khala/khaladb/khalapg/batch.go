package khalapg

import (
	"context"
	"slices"
	"sync"
)

// A replica's concurrent statements of one kind share statements. The
// database sets up a statement's plan at each execution, which costs more
// than the rows most of these statements write: a claim of eight turns
// costs it about a fifth of eight claims of one (BenchmarkClaimBatch). So
// a call that finds a statement of its kind under way waits for it and
// then goes in the next one with every other call that came meanwhile (a
// group commit). A call that finds none under way runs at once, alone; the
// wait is at most one statement's time, and only while the replica is
// busy with that kind anyway.

// batcher groups concurrent calls of one kind (key) into one run each.
type batcher[Q, R any] struct {
	mu      sync.Mutex
	running map[string]*batch[Q, R] // a run of this key is under way; the batch that waits for it, or nil
}

// batch is calls that go in one run.
type batch[Q, R any] struct {
	qs    []Q
	ctxs  []context.Context
	start chan struct{} // closed when the batch may run: its first call runs it
	done  chan struct{} // closed when out and err are set
	out   []R
	err   error
}

// do runs q with every call of the same key that joins it: at once when
// no run of key is under way, else in the next run. run gets the calls in
// the order they came and returns a result for each.
func (g *batcher[Q, R]) do(ctx context.Context, key string, q Q, run func(context.Context, []Q) ([]R, error)) (R, error) {
	var zero R
	g.mu.Lock()
	if g.running == nil {
		g.running = map[string]*batch[Q, R]{}
	}
	b, busy := g.running[key]
	if !busy {
		g.running[key] = nil
		g.mu.Unlock()
		defer g.ran(key) // even if run panics: the next batch waits for it
		out, err := run(ctx, []Q{q})
		if err != nil {
			return zero, err
		}
		return out[0], nil
	}
	first := b == nil
	if first {
		b = &batch[Q, R]{start: make(chan struct{}), done: make(chan struct{})}
		g.running[key] = b
	}
	i := len(b.qs)
	b.qs, b.ctxs = append(b.qs, q), append(b.ctxs, ctx)
	g.mu.Unlock()
	if first {
		<-b.start
		defer g.ran(key)
		b.run(run)
	} else {
		<-b.done
	}
	if b.err != nil {
		return zero, b.err
	}
	return b.out[i], nil
}

// ran ends a run of key: the batch that waited for it runs next.
func (g *batcher[Q, R]) ran(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.running[key]
	if b == nil {
		delete(g.running, key)
		return
	}
	g.running[key] = nil // b is under way; calls that come now wait for it
	close(b.start)
}

// run runs b, cancelled only when every call in it is: a call whose
// caller has gone still gets its result (a claim's turns are given back
// by the server, as any claim's are), and a run whose callers have all
// gone does not start.
func (b *batch[Q, R]) run(fn func(context.Context, []Q) ([]R, error)) {
	defer close(b.done)
	if !slices.ContainsFunc(b.ctxs, func(c context.Context) bool { return c.Err() == nil }) {
		b.err = context.Cause(b.ctxs[0])
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(b.ctxs[0]))
	defer cancel()
	var mu sync.Mutex
	left := len(b.ctxs)
	for _, c := range b.ctxs {
		stop := context.AfterFunc(c, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel()
			}
		})
		defer stop()
	}
	b.out, b.err = fn(ctx, b.qs)
}
