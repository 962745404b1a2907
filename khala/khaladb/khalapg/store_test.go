package khalapg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

func pgQueryInt(t *testing.T, dsn, sql string) int { return pgQuery[int](t, dsn, sql) }

func pgQueryString(t *testing.T, dsn, sql string) string { return pgQuery[string](t, dsn, sql) }

// pgQuery is the one value sql selects.
func pgQuery[T any](t *testing.T, dsn, sql string) T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(t.Context(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func pgExec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// openPG opens a store on dsn, closed when t ends, logging to t.
func openPG(t testing.TB, dsn string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, Options{DSN: dsn, PoolSize: 8, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The storage contract (khaladbtest), on a fresh database each time.
func TestContract(t *testing.T) {
	khaladbtest.Exercise(t, func(t testing.TB) khaladb.Storage { return openPG(t, pgtest.Database(t)) })
}

// Replicas starting together on an empty database migrate it once; a
// restart finds nothing to do; a schema newer than the binary is refused
// and left as it is.
func TestPostgresMigrations(t *testing.T) {
	dsn := pgtest.Database(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := Open(t.Context(), Options{DSN: dsn, PoolSize: 2})
			if err == nil {
				p.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	want := SchemaVersion()
	if got := pgQueryInt(t, dsn, "SELECT count(*) FROM khala_schema"); got != want {
		t.Fatalf("%d schema rows after five concurrent starts, want %d", got, want)
	}
	openPG(t, dsn).Close() // a restart
	if got := pgQueryInt(t, dsn, "SELECT count(*) FROM khala_schema"); got != want {
		t.Fatalf("a restart re-applied migrations: %d rows", got)
	}
	pgExec(t, dsn, "INSERT INTO khala_schema (version, name) VALUES (99, 'from_the_future')")
	_, err := Open(t.Context(), Options{DSN: dsn})
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("a newer schema: %v", err)
	}
	t.Logf("refused: %v", err)
	if got := pgQueryInt(t, dsn, "SELECT max(version) FROM khala_schema"); got != 99 {
		t.Fatalf("the refusal changed the version table: %d", got)
	}
}

func TestLoadMigrations(t *testing.T) {
	ms, err := loadMigrations(migrationFiles)
	if err != nil || len(ms) == 0 || ms[0].version != 1 || ms[0].name != "init" {
		t.Fatalf("embedded migrations: %v %+v", err, ms)
	}
	for _, bad := range []fstest.MapFS{
		{"migrations/001_a.sql": {}, "migrations/003_c.sql": {}},
		{"migrations/002_b.sql": {}},
		{"migrations/x_a.sql": {}},
	} {
		if _, err := loadMigrations(bad); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

// The password never shows: not in what a bad or unreachable DSN says,
// not in the display form, not in what a wrong password says.
func TestPostgresDSNSecrets(t *testing.T) {
	c := pgtest.Need(t)
	const right, wrong = "right-pass-1x9", "wrong-pass-7q2"
	role := fmt.Sprintf("khala_pw_%d", time.Now().UnixNano())
	if err := c.Exec(t.Context(), fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, right)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	port := c.Port()
	for _, tc := range []struct {
		dsn  string
		want error
	}{
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", role, wrong, port), khaladb.ErrUnavailable},
		{fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=postgres sslmode=disable", port, role, wrong), khaladb.ErrUnavailable},
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", role, wrong), khaladb.ErrUnavailable},
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:notaport/postgres", role, wrong), ErrBadDSN},
		{fmt.Sprintf("host=127.0.0.1 port=http user=%s password=%s", role, wrong), ErrBadDSN},
		{fmt.Sprintf("postgres://%s:%s@[::1/postgres", role, wrong), ErrBadDSN},
	} {
		_, err := Open(t.Context(), Options{DSN: tc.dsn})
		if !errors.Is(err, tc.want) || strings.Contains(err.Error(), wrong) {
			t.Errorf("%s: want %v without the password, got %v", DisplayDSN(tc.dsn), tc.want, err)
		}
		if d := DisplayDSN(tc.dsn); strings.Contains(d, wrong) {
			t.Errorf("display %q shows the password", d)
		}
		t.Logf("%v", err)
	}
	// The right password opens it, and its display hides it.
	dsn := fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", role, right, port)
	if err := c.Exec(t.Context(), "GRANT CREATE ON SCHEMA public TO "+role); err != nil {
		t.Fatal(err)
	}
	name, _, err := c.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DropDatabase(context.Background(), name) })
	c.Exec(t.Context(), fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", name, role))
	dsn = strings.Replace(dsn, "/postgres?", "/"+name+"?", 1)
	p := openPG(t, dsn)
	if d := p.Display(); strings.Contains(d, right) || !strings.Contains(d, role+"@127.0.0.1") {
		t.Fatalf("display: %q", d)
	}
}

// The usage rollup's cost per answer commit (khaladbtest.BenchAnswerCommit).
func BenchmarkAnswerCommit(b *testing.B) {
	khaladbtest.BenchAnswerCommit(b, openPG(b, pgtest.Database(b)))
}
