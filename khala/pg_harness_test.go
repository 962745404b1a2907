package khala

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"

	"github.com/nerve-agents/nerve/khala/pgtest"
)

// pgBackend gives a test a fresh database on the test binary's
// PostgreSQL cluster (pgtest), and opens stores on it: each one is what a
// replica holds.
var pgBackend = backend{"postgres", newPGDB, func(t testing.TB, o ServeOptions) khaladb.Storage { return openPG(t, o.Postgres) }}

func newPGDB(t testing.TB) ServeOptions { return ServeOptions{Postgres: pgtest.Database(t)} }

// openPG opens a store on dsn, closed when t ends, logging to t.
func openPG(t testing.TB, dsn string) *khalapg.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := khalapg.Open(ctx, khalapg.Options{DSN: dsn, PoolSize: 8, Logger: testLogger(t)})
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
