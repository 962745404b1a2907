package khalapg

import (
	"context"
	"errors"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"
)

// Revoking an agent. Every replica caches agents by token (AgentByToken),
// so a revoke must reach every replica's cache before it is reported
// done. Unlike wake-up hints, the revoke's NOTIFY is sent inside its own
// transaction: PostgreSQL delivers it exactly when the delete commits, to
// every replica listening then. A replica whose listener was down clears
// its cache when it listens again (listen), and cache entries expire after
// a minute whatever happens: the bound on a replica whose connection died
// without its knowing.

// revokeChannel carries revokes: a channel of its own, never coalesced
// with hints and never skipped as an echo (the revoking replica hears
// its own too).
const revokeChannel = "khala_revokes"

// RevokeAgent implements Storage.
func (p *Store) RevokeAgent(ctx context.Context, name string) error {
	found := false
	err := p.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM khala_agents WHERE name = $1", name)
		if err != nil {
			return err
		}
		if found = tag.RowsAffected() > 0; !found {
			return errStop
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", revokeChannel, name)
		return err
	})
	if errors.Is(err, errStop) {
		return khaladb.ErrNotFound
	}
	if err == nil {
		p.forgetAgents() // this replica at once, before the echo arrives
	}
	return p.fail("revoke agent "+name, err)
}

// forgetAgents clears the agent cache and tells lookups under way not to
// cache what they read before the revoke.
func (p *Store) forgetAgents() {
	p.revokes.Add(1)
	p.agents.Clear()
}
