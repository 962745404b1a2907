package khala

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khalabolt"
	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// backend is a Storage the suite runs on. newDB makes a fresh, empty
// database and says where it is as Serve's options; openDB opens a store
// on it (again: the server restarted, or another replica).
type backend struct {
	name   string
	newDB  func(t testing.TB) ServeOptions
	openDB func(t testing.TB, o ServeOptions) khaladb.Storage
}

// backends are what every test that takes a backend runs on, each as a
// subtest: the embedded bbolt file, and PostgreSQL (pgBackend),
// which skips with a reason when PostgreSQL is not installed.
var backends = []backend{boltBackend, pgBackend}

var boltBackend = backend{"bolt", newBoltDB, openBoltDB}

// open returns a store on a fresh database of bk, and a func that opens
// another store over the same data.
func (bk backend) open(t testing.TB) (khaladb.Storage, func(testing.TB) khaladb.Storage) {
	t.Helper()
	o := bk.newDB(t)
	reopen := func(t testing.TB) khaladb.Storage {
		t.Helper()
		return bk.openDB(t, o)
	}
	return reopen(t), reopen
}

// serveOptions are Serve's options for a fresh database of bk, with an
// enrollment token issued in it.
func (bk backend) serveOptions(t testing.TB) (ServeOptions, string) {
	t.Helper()
	o := bk.newDB(t)
	store := bk.openDB(t, o)
	defer store.Close()
	et, err := IssueEnrollToken(t.Context(), store, 100, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return o, et.Token
}

// eachBackend runs test once per backend.
func eachBackend(t *testing.T, test func(t *testing.T, bk backend)) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) { test(t, bk) })
	}
}

func newBoltDB(t testing.TB) ServeOptions {
	return ServeOptions{DB: filepath.Join(t.TempDir(), "khala.db")}
}

func openBoltDB(t testing.TB, o ServeOptions) khaladb.Storage {
	t.Helper()
	store, err := khalabolt.Open(o.DB, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

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

// logWriter routes server logs to t.Log until the test ends.
type logWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
