package pgtest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared is the test binary's cluster, started on first use: one server,
// a fresh database per test.
func Shared() (*Cluster, error) {
	shared.once.Do(func() { shared.c, shared.err = Start(Options{}) })
	return shared.c, shared.err
}

// Need returns the shared cluster, or skips t (fails it under
// NERVE_REQUIRE_POSTGRES=1) when PostgreSQL cannot be run here.
func Need(t testing.TB) *Cluster {
	t.Helper()
	c, err := Shared()
	if err != nil {
		Unavailable(t, err)
	}
	return c
}

// Unavailable skips t because PostgreSQL cannot be run, or fails it when
// NERVE_REQUIRE_POSTGRES=1 says it must.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("PostgreSQL is required (%s=1) but cannot be run: %v", EnvRequire, err)
	}
	t.Skipf("skipping the PostgreSQL tests: %v (set %s=1 to make this a failure)", err, EnvRequire)
}

// Database creates a fresh database on the shared cluster for t and
// returns its DSN; it is dropped when t ends.
func Database(t testing.TB) string {
	t.Helper()
	c := Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, dsn, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatalf("create a test database: %v\n%s", err, c.LogTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	return dsn
}

// Own starts a cluster of t's own (for tests that stop or crash the
// server), removed when t ends.
func Own(t testing.TB, o Options) *Cluster {
	t.Helper()
	if _, err := Bin(); err != nil {
		Unavailable(t, err)
	}
	c, err := Start(o)
	if err != nil {
		t.Fatalf("start a PostgreSQL cluster: %v", err)
	}
	t.Cleanup(c.Remove)
	return c
}
