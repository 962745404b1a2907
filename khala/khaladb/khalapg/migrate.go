package khalapg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The schema's migrations, NNN_name.sql, applied in order. A migration
// once released never changes: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaTooNew says the database was migrated by a newer nerve: this
// one refuses to touch it rather than misread it.
var ErrSchemaTooNew = errors.New("the database's Khala schema is newer than this nerve knows")

// migrateLock is the advisory lock key under which replicas migrate, so
// two starting together apply each migration once ("khala" in ASCII).
const migrateLock = 0x6b68616c61

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations, which must be numbered
// 1, 2, 3... without gaps.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for i, name := range names { // Glob sorts; numbers are zero-padded
		base := strings.TrimSuffix(path.Base(name), ".sql")
		num, label, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want number %03d", name, i+1)
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: label, sql: string(data)})
	}
	return out, nil
}

// SchemaVersion is the newest schema this binary knows.
func SchemaVersion() int {
	ms, _ := loadMigrations(migrationFiles)
	return len(ms)
}

// migrate brings the schema up to date in one transaction under an
// advisory lock: a replica that starts while another migrates waits, then
// finds nothing left to do; a migration that fails leaves no trace.
func (p *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return err
	}
	var applied []string
	err = p.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS khala_schema (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var cur int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM khala_schema").Scan(&cur); err != nil {
			return err
		}
		if cur > len(ms) {
			return fmt.Errorf("%w: the database is at version %d, this nerve knows up to %d; run a nerve at least as new as the one that migrated it",
				ErrSchemaTooNew, cur, len(ms))
		}
		for _, m := range ms[cur:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %03d_%s: %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO khala_schema (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
				return err
			}
			applied = append(applied, fmt.Sprintf("%03d_%s", m.version, m.name))
		}
		return nil
	})
	if errors.Is(err, ErrSchemaTooNew) {
		return err
	}
	if err != nil {
		return p.fail("migrate the schema", err)
	}
	if len(applied) > 0 {
		p.log.Info("schema migrated", "db", p.display, "applied", strings.Join(applied, ","), "version", len(ms))
	}
	return nil
}
