package khalapg

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Claims of one replica share statements. A claim whose filters match one
// already under way waits for it and then goes in the next statement with
// every other claim that came meanwhile (a group commit of claims): the
// database sets up a statement's plan at each execution, which costs more
// than claiming a turn, so a claim of eight turns costs it about a fifth
// of eight claims of one (BenchmarkClaimBatch). A claim that finds none of
// its filters under way runs at once, as before; the wait is at most one
// statement's time, and only while the replica is claiming anyway.

// claimBatches groups a replica's concurrent claims by their filters.
type claimBatches struct {
	mu      sync.Mutex
	running map[string]*claimBatch // a statement of these filters is under way; the batch that waits for it, or nil

	claims, statements atomic.Int64
}

// ClaimStats counts the claims made since the store was opened and the
// statements that made them.
type ClaimStats struct{ Claims, Statements int64 }

// ClaimStats says how many claims shared statements.
func (p *Store) ClaimStats() ClaimStats {
	return ClaimStats{Claims: p.batches.claims.Load(), Statements: p.batches.statements.Load()}
}

// claimBatch is claims that go in one statement.
type claimBatch struct {
	qs    []khaladb.ClaimQuery
	ctxs  []context.Context
	start chan struct{} // closed when the batch may run: its first claim runs it
	done  chan struct{} // closed when out and err are set
	out   [][]khaladb.Turn
	err   error
}

// filterKey is what claims must share to go in one statement.
func filterKey(q khaladb.ClaimQuery) string {
	return strings.Join(q.Workflows, "\x00") + "\x01" + strings.Join(q.Roles, "\x00")
}

// Claim implements Storage.
func (p *Store) Claim(ctx context.Context, q khaladb.ClaimQuery) ([]khaladb.Turn, error) {
	key := filterKey(q)
	g := &p.batches
	g.mu.Lock()
	if g.running == nil {
		g.running = map[string]*claimBatch{}
	}
	b, busy := g.running[key]
	if !busy {
		g.running[key] = nil
		g.mu.Unlock()
		out, err := p.claimTurns(ctx, []khaladb.ClaimQuery{q})
		p.claimed(key)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	first := b == nil
	if first {
		b = &claimBatch{start: make(chan struct{}), done: make(chan struct{})}
		g.running[key] = b
	}
	i := len(b.qs)
	b.qs, b.ctxs = append(b.qs, q), append(b.ctxs, ctx)
	g.mu.Unlock()
	if first {
		<-b.start
		p.runBatch(b)
		p.claimed(key)
	} else {
		<-b.done
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.out[i], nil
}

// claimed ends a statement of filters key: the batch that waited for it
// runs next.
func (p *Store) claimed(key string) {
	g := &p.batches
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.running[key]
	if b == nil {
		delete(g.running, key)
		return
	}
	g.running[key] = nil // b is under way; claims that come now wait for it
	close(b.start)
}

// runBatch runs b's claims in one statement, which is cancelled only when
// every claim in it is: the turns of a claim whose caller has gone are
// still returned to it, and given back by the server as any claim's are.
func (p *Store) runBatch(b *claimBatch) {
	defer close(b.done)
	if !slices.ContainsFunc(b.ctxs, func(c context.Context) bool { return c.Err() == nil }) {
		b.err = p.fail("claim", context.Cause(b.ctxs[0]))
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
	b.out, b.err = p.claimTurns(ctx, b.qs)
}

// claimTurns claims for each of qs (all of one filter) in one statement:
// its turns, in queue order.
func (p *Store) claimTurns(ctx context.Context, qs []khaladb.ClaimQuery) ([][]khaladb.Turn, error) {
	var claims, agents []string
	owner := map[string]int{} // claim id → its claim's index
	for i, q := range qs {
		for range q.Max {
			id := khaladb.NewClaimID()
			claims, agents = append(claims, id), append(agents, q.Agent)
			owner[id] = i
		}
	}
	q := qs[0]
	for _, o := range qs[1:] {
		if o.Now.After(q.Now) {
			q.Now = o.Now // the latest: no lease starts before its claim
		}
	}
	p.batches.claims.Add(int64(len(qs)))
	p.batches.statements.Add(1)
	turns, err := p.claimStatement(ctx, q, claims, agents)
	if err != nil {
		return nil, err
	}
	out := make([][]khaladb.Turn, len(qs))
	for _, t := range turns {
		i := owner[t.Claim]
		out[i] = append(out[i], t)
	}
	for i := range out {
		out[i] = slices.Clip(out[i])
	}
	return out, nil
}
