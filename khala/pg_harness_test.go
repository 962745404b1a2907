package khala

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// openPostgresBackend gives a test a fresh database on the test binary's
// PostgreSQL cluster (pgtest), and opens stores on it: each one is what a
// replica holds.
func openPostgresBackend(t testing.TB) (Storage, func(testing.TB) Storage) {
	dsn := pgtest.Database(t)
	open := func(t testing.TB) Storage {
		t.Helper()
		return openPG(t, dsn)
	}
	return open(t), open
}

// openPG opens a store on dsn, closed when t ends, logging to t.
func openPG(t testing.TB, dsn string) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := OpenPostgres(ctx, PostgresOptions{DSN: dsn, PoolSize: 8, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testLogger routes a logger to t.Log until t ends.
func testLogger(t testing.TB) *slog.Logger {
	lw := &logWriter{t: t}
	t.Cleanup(func() { lw.mu.Lock(); lw.done = true; lw.mu.Unlock() })
	return slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
