package khalapg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"
)

// AddEnrollToken implements Storage.
func (p *Store) AddEnrollToken(ctx context.Context, t khaladb.EnrollToken) error {
	_, err := p.pool.Exec(ctx, "INSERT INTO khala_enroll_tokens (hash, uses, expires_at, created_at, scopes) VALUES ($1, $2, $3, $4, $5)",
		t.Hash[:], t.Uses, shared.Nanos(t.ExpiresAt), shared.Nanos(t.CreatedAt), joinScopes(t.Scopes))
	return p.fail("add an enrollment token", err)
}

// Enroll implements Storage: the token row is locked, so two agents
// enrolling with the last use of a token on two replicas cannot both
// succeed.
func (p *Store) Enroll(ctx context.Context, enroll khaladb.Hash, a khaladb.Agent) error {
	var result error
	err := p.tx(ctx, func(tx pgx.Tx) error {
		result = nil
		var uses int
		var expires int64
		var scopes *string
		err := tx.QueryRow(ctx, "SELECT uses, expires_at, scopes FROM khala_enroll_tokens WHERE hash = $1 FOR UPDATE", enroll[:]).Scan(&uses, &expires, &scopes)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			result = khaladb.ErrUnauthorized
		case err != nil:
			return err
		case expires != 0 && !a.EnrolledAt.Before(shared.FromNanos(expires)):
			result = fmt.Errorf("%w: enrollment token expired at %s", khaladb.ErrUnauthorized, shared.FromNanos(expires).Format(time.RFC3339))
		case uses <= 0:
			result = fmt.Errorf("%w: enrollment token has been used up", khaladb.ErrUnauthorized)
		}
		if result != nil {
			return errStop
		}
		tag, err := tx.Exec(ctx, "INSERT INTO khala_agents (name, token, enrolled_at, scopes) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
			a.Name, a.Token[:], shared.Nanos(a.EnrolledAt), scopes)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			result = khaladb.ErrNameTaken
			return errStop
		}
		_, err = tx.Exec(ctx, "UPDATE khala_enroll_tokens SET uses = uses - 1 WHERE hash = $1", enroll[:])
		return err
	})
	if errors.Is(err, errStop) {
		return result
	}
	return p.fail("enroll "+a.Name, err)
}

// errStop rolls a transaction back for a business outcome reported
// through the closure.
var errStop = errors.New("stop")

// AgentByToken implements Storage. It is asked on every request, so
// agents are cached (see shared.Agents); a revoke on any replica clears
// every replica's cache (RevokeAgent).
func (p *Store) AgentByToken(ctx context.Context, h khaladb.Hash) (khaladb.Agent, error) {
	if a, ok := p.agents.Get(h); ok {
		return a, nil
	}
	var (
		a      khaladb.Agent
		token  []byte
		at     int64
		scopes *string
	)
	gen := p.revokes.Load()
	err := p.pool.QueryRow(ctx, "SELECT name, token, enrolled_at, scopes FROM khala_agents WHERE token = $1", h[:]).Scan(&a.Name, &token, &at, &scopes)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && len(token) != len(a.Token)) {
		return khaladb.Agent{}, khaladb.ErrUnauthorized
	}
	if err != nil {
		return khaladb.Agent{}, p.fail("look up an agent", err)
	}
	copy(a.Token[:], token)
	a.EnrolledAt = shared.FromNanos(at)
	a.Scopes = splitScopes(scopes)
	if !khaladb.SameHash(a.Token, h) {
		return khaladb.Agent{}, khaladb.ErrUnauthorized
	}
	if p.revokes.Load() == gen {
		// Not when a revoke was heard meanwhile: this read may predate it.
		p.agents.Put(h, a)
	}
	return a, p.fail("", nil)
}

// PutWorkflow implements Storage.
func (p *Store) PutWorkflow(ctx context.Context, w khaladb.WorkflowRecord, source []byte) (bool, error) {
	var created bool
	var notOwner error
	err := p.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO khala_sources (hash, source) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
			w.SourceHash, source); err != nil {
			return err
		}
		// xmax = 0 only for a row this statement inserted. The owner is
		// checked in the statement (the row is locked by the conflict),
		// so two agents publishing one new name cannot both own it.
		owner := w.Owner
		if owner == "" {
			owner = w.UpdatedBy
		}
		err := tx.QueryRow(ctx, `INSERT INTO khala_workflows (name, source_hash, updated_at, updated_by, owner) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (name) DO UPDATE SET source_hash = $2, updated_at = $3, updated_by = $4,
				owner = CASE WHEN khala_workflows.owner = '' THEN khala_workflows.updated_by ELSE khala_workflows.owner END
			WHERE $6 = '' OR $6 = CASE WHEN khala_workflows.owner = '' THEN khala_workflows.updated_by ELSE khala_workflows.owner END
			RETURNING xmax = 0`, w.Name, w.SourceHash, shared.Nanos(w.UpdatedAt), w.UpdatedBy, owner, w.Owner).Scan(&created)
		if errors.Is(err, pgx.ErrNoRows) {
			old, rerr := scanWorkflow(tx.QueryRow(ctx, "SELECT "+workflowCols+" FROM khala_workflows WHERE name = $1", w.Name))
			if rerr != nil {
				return rerr
			}
			notOwner = fmt.Errorf("%w: workflow %s is %s's", khaladb.ErrNotOwner, w.Name, old.OwnedBy())
			return errStop
		}
		return err
	})
	if errors.Is(err, errStop) {
		return false, notOwner
	}
	return created, p.fail("publish workflow "+w.Name, err)
}

const workflowCols = "name, source_hash, updated_at, updated_by, owner"

func scanWorkflow(row pgx.Row) (khaladb.WorkflowRecord, error) {
	var w khaladb.WorkflowRecord
	var at int64
	err := row.Scan(&w.Name, &w.SourceHash, &at, &w.UpdatedBy, &w.Owner)
	w.UpdatedAt = shared.FromNanos(at)
	return w, err
}

// Workflow implements Storage.
func (p *Store) Workflow(ctx context.Context, name string) (khaladb.WorkflowRecord, error) {
	w, err := scanWorkflow(p.pool.QueryRow(ctx, "SELECT "+workflowCols+" FROM khala_workflows WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, khaladb.ErrNotFound
	}
	return w, p.fail("read workflow "+name, err)
}

// Workflows implements Storage.
func (p *Store) Workflows(ctx context.Context) ([]khaladb.WorkflowRecord, error) {
	rows, err := p.pool.Query(ctx, "SELECT "+workflowCols+" FROM khala_workflows ORDER BY name")
	if err != nil {
		return nil, p.fail("list workflows", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.WorkflowRecord, error) { return scanWorkflow(r) })
	return out, p.fail("list workflows", err)
}

// Source implements Storage.
func (p *Store) Source(ctx context.Context, hash string) ([]byte, error) {
	var src []byte
	err := p.pool.QueryRow(ctx, "SELECT source FROM khala_sources WHERE hash = $1", hash).Scan(&src)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, khaladb.ErrNotFound
	}
	return src, p.fail("read a definition", err)
}
