package khalapg

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// claimBatches shares statements among a replica's concurrent claims of
// the same filters (batch.go).
type claimBatches struct {
	batcher[khaladb.ClaimQuery, []khaladb.Turn]
	claims, statements atomic.Int64
}

// ClaimStats counts the claims made since the store was opened, and the
// statements run to make them.
type ClaimStats struct{ Claims, Statements int64 }

// ClaimStats says how many claims shared statements.
func (p *Store) ClaimStats() ClaimStats {
	return ClaimStats{Claims: p.batches.claims.Load(), Statements: p.batches.statements.Load()}
}

// filterKey is what claims must share to go in one statement.
func filterKey(q khaladb.ClaimQuery) string {
	return strings.Join(q.Workflows, "\x00") + "\x01" + strings.Join(q.Roles, "\x00") + "\x01" + q.Repos.Key()
}

// Claim implements Storage.
func (p *Store) Claim(ctx context.Context, q khaladb.ClaimQuery) ([]khaladb.Turn, error) {
	// An error is claimStatement's, or the context's when every claim of
	// its batch was cancelled before it ran.
	return p.batches.do(ctx, filterKey(q), q, p.claimTurns)
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
	p.batches.statements.Add(1)
	turns, err := p.claimStatement(ctx, q, claims, agents)
	if err != nil {
		return nil, err
	}
	p.batches.claims.Add(int64(len(qs)))
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
