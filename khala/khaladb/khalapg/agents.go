package khalapg

import (
	"context"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"
)

// agentsSQL lists agents with the turns leased to them, one row per turn
// (or one with no turn). The claimed turns are found through the lease
// index (khala_turns_leases), whose rows are exactly those.
const agentsSQL = `SELECT a.name, a.enrolled_at, a.last_seen, a.scopes, t.thread, t.step
FROM khala_agents a LEFT JOIN khala_turns t ON t.agent = a.name AND t.state = 'claimed'
ORDER BY a.name, t.thread, t.step`

// Agents implements Storage.
func (p *Store) Agents(ctx context.Context) ([]khaladb.AgentStatus, error) {
	rows, err := p.pool.Query(ctx, agentsSQL)
	if err != nil {
		return nil, p.fail("list agents", err)
	}
	defer rows.Close()
	var out []khaladb.AgentStatus
	for rows.Next() {
		var (
			name         string
			enrolled, ls int64
			thread, step *int64
			scopes       *string
		)
		if err := rows.Scan(&name, &enrolled, &ls, &scopes, &thread, &step); err != nil {
			return nil, p.fail("list agents", err)
		}
		if len(out) == 0 || out[len(out)-1].Name != name {
			out = append(out, khaladb.AgentStatus{Name: name, EnrolledAt: shared.FromNanos(enrolled), LastSeen: shared.FromNanos(ls),
				Scopes: splitScopes(scopes)})
		}
		if thread != nil {
			a := &out[len(out)-1]
			a.Held = append(a.Held, khaladb.TurnID(khaladb.ThreadID(uint64(*thread)), int(*step)))
		}
	}
	return out, p.fail("list agents", rows.Err())
}

// SawAgents implements Storage: one statement for all of them.
func (p *Store) SawAgents(ctx context.Context, seen map[string]time.Time) error {
	if len(seen) == 0 {
		return ctx.Err()
	}
	names, ats := make([]string, 0, len(seen)), make([]int64, 0, len(seen))
	for name, at := range seen {
		names, ats = append(names, name), append(ats, shared.Nanos(at))
	}
	_, err := p.pool.Exec(ctx, `UPDATE khala_agents a SET last_seen = u.at
		FROM unnest($1::text[], $2::bigint[]) AS u(name, at) WHERE a.name = u.name AND a.last_seen < u.at`, names, ats)
	return p.fail("record when agents were seen", err)
}

// joinScopes stores scopes as one text column: NULL for none, the legacy
// set of a token issued before scopes (see 006_scopes.sql).
func joinScopes(scopes []string) *string {
	if len(scopes) == 0 {
		return nil
	}
	s := strings.Join(scopes, ",")
	return &s
}

func splitScopes(s *string) []string {
	if s == nil || *s == "" {
		return nil
	}
	return strings.Split(*s, ",")
}
