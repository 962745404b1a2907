package khalapg

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// The claims' warm-up plans both statements on a migrated database
// (a failure would be silent in Open: before migration it is expected),
// and claims nothing.
func TestWarmClaimsPlans(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	none := []string{}
	if _, err := conn.Exec(t.Context(), "EXPLAIN "+claimOneSQL, pgx.QueryExecModeSimpleProtocol, none, none, "warm", "warm", int64(0), "", none); err != nil {
		t.Fatalf("EXPLAIN claimOneSQL: %v", err)
	}
	if _, err := conn.Exec(t.Context(), "EXPLAIN "+claimSQL, pgx.QueryExecModeSimpleProtocol, 2, none, none, []string{"warm", "warm"}, []string{"warm", "warm"}, int64(0), "", none); err != nil {
		t.Fatalf("EXPLAIN claimSQL: %v", err)
	}
	if err := warmClaims(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.pool.QueryRow(t.Context(), "SELECT count(*) FROM khala_events").Scan(&n); err != nil || n != 0 {
		t.Fatalf("events after a warm-up: %d %v", n, err)
	}
}

// The sweeper's statements walk the turns' partial indexes under the
// generic plans every connection uses (plan_cache_mode), never the whole
// table: it runs on every lease handed out.
func TestDuePlansUseIndexes(t *testing.T) {
	dsn := pgtest.Database(t)
	openPG(t, dsn)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{"due": dueSQL, "next_due": nextDueSQL} {
		if _, err := conn.Exec(t.Context(), "PREPARE "+name+" AS "+q); err != nil {
			t.Fatal(err)
		}
		args := "(0)"
		if name == "due" {
			args = "(0, 10)"
		}
		rows, err := conn.Query(t.Context(), "EXPLAIN EXECUTE "+name+args)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan") {
			t.Errorf("%s scans the table:\n%s", name, text)
		}
	}
}

// A claim counts the claimed turn's queued siblings by the thread's key,
// not by walking the whole queue index (whose key leads with priority and
// age: a claim would then read every queued turn's entry, thousands in a
// deep queue), under the plans the store's own connections make.
func TestClaimPlansCountSiblingsByKey(t *testing.T) {
	dsn := pgtest.Database(t)
	p := openPG(t, dsn)
	for range 300 {
		khaladbtest.StartThread(t, p, "deep", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	}
	none := []string{}
	for name, plan := range map[string]string{
		"claimOneSQL": explain(t, p, claimOneSQL, none, none, "c", "a", int64(0), "", none),
		"claimSQL":    explain(t, p, claimSQL, 2, none, none, []string{"c1", "c2"}, []string{"a", "b"}, int64(0), "", none),
	} {
		if n := strings.Count(plan, "using khala_turns_queue"); n != 1 || !strings.Contains(plan, "using khala_turns_pkey on khala_turns q") {
			t.Errorf("%s walks the queue index %d times (once: to pick), or finds siblings by another index than the key:\n%s", name, n, plan)
		}
	}
}

// explain is the plan of sql with args on one of p's connections, as its
// own statements are planned (Open's settings).
func explain(t *testing.T, p *Store, sql string, args ...any) string {
	t.Helper()
	rows, err := p.pool.Query(t.Context(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
