package khalapg

import (
	"context"
	"errors"

	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"
)

// AddPerson implements Storage.
func (p *Store) AddPerson(ctx context.Context, ps khaladb.Person) error {
	tag, err := p.pool.Exec(ctx, "INSERT INTO khala_people (name, token, added_at, scopes) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
		ps.Name, ps.Token[:], shared.Nanos(ps.AddedAt), joinScopes(ps.Scopes))
	if err == nil && tag.RowsAffected() == 0 {
		return khaladb.ErrNameTaken
	}
	return p.fail("add person "+ps.Name, err)
}

// RemovePerson implements Storage.
func (p *Store) RemovePerson(ctx context.Context, name string) error {
	tag, err := p.pool.Exec(ctx, "DELETE FROM khala_people WHERE name = $1", name)
	if err == nil && tag.RowsAffected() == 0 {
		return khaladb.ErrNotFound
	}
	return p.fail("remove person "+name, err)
}

func scanPerson(row pgx.Row) (khaladb.Person, error) {
	var (
		ps     khaladb.Person
		token  []byte
		at     int64
		scopes *string
	)
	if err := row.Scan(&ps.Name, &token, &at, &scopes); err != nil {
		return ps, err
	}
	ps.Scopes = splitScopes(scopes)
	copy(ps.Token[:], token)
	ps.AddedAt = shared.FromNanos(at)
	return ps, nil
}

// People implements Storage.
func (p *Store) People(ctx context.Context) ([]khaladb.Person, error) {
	rows, err := p.pool.Query(ctx, "SELECT name, token, added_at, scopes FROM khala_people ORDER BY name")
	if err != nil {
		return nil, p.fail("list people", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.Person, error) { return scanPerson(r) })
	return out, p.fail("list people", err)
}

// PersonByToken implements Storage: read from the database every time,
// so a person removed on any replica is refused by all at once.
func (p *Store) PersonByToken(ctx context.Context, h khaladb.Hash) (khaladb.Person, error) {
	ps, err := scanPerson(p.pool.QueryRow(ctx, "SELECT name, token, added_at, scopes FROM khala_people WHERE token = $1", h[:]))
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !khaladb.SameHash(ps.Token, h)) {
		return khaladb.Person{}, khaladb.ErrUnauthorized
	}
	return ps, p.fail("look up a person", err)
}

// WaitingTurns implements Storage.
func (p *Store) WaitingTurns(ctx context.Context) ([]khaladb.Turn, error) {
	rows, err := p.pool.Query(ctx, "SELECT "+turnCols+" FROM khala_turns WHERE state = 'waiting' ORDER BY first_queued, thread, step")
	if err != nil {
		return nil, p.fail("list waiting turns", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.Turn, error) { return scanTurn(r) })
	return out, p.fail("list waiting turns", err)
}
