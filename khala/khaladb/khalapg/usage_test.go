package khalapg

import (
	"strconv"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// Migration 003 fills the rollup from the answers recorded before it,
// reading old records (cached_tokens, zeros left out) as well as new ones.
func TestUsageMigrationFillsTheRollup(t *testing.T) {
	dsn := pgtest.Database(t)
	ms, err := loadMigrations(migrationFiles)
	if err != nil || len(ms) < 3 || ms[2].name != "usage" {
		t.Fatalf("migrations: %v", err)
	}
	pgExec(t, dsn, `CREATE TABLE khala_schema (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms[:2] {
		pgExec(t, dsn, m.sql)
		pgExec(t, dsn, "INSERT INTO khala_schema (version, name) VALUES ("+strconv.Itoa(m.version)+", '"+m.name+"')")
	}
	pgExec(t, dsn, `INSERT INTO khala_threads (n, workflow, status, version, pending, record) VALUES
		(1, 'review', 'completed', 3, '{}', '{}'::bytea), (2, 'fix', 'running', 2, '{}', '{}'::bytea)`)
	pgExec(t, dsn, `INSERT INTO khala_messages (thread, step, record) VALUES
		(1, 1, convert_to('{"step":1,"role":"author","agent":"laptop","adapter":"codex","at":"2026-11-20T23:30:00+01:00","usage":{"model":"gpt","input_tokens":80,"cached_tokens":40,"duration_ms":5}}', 'UTF8')),
		(1, 2, convert_to('{"step":2,"role":"reviewer","agent":"laptop","adapter":"claude","at":"2026-11-21T10:00:00Z","usage":{"model":"opus","input_tokens":10,"output_tokens":2,"cache_read_tokens":0,"cost_usd":0.5,"duration_ms":7,"session_id":null}}', 'UTF8')),
		(2, 1, convert_to('{"step":1,"role":"author","agent":"ci","adapter":"exec","at":"2026-11-21T10:00:00Z","usage":null}', 'UTF8'))`)
	p := openPG(t, dsn)
	rows, err := p.Usage(t.Context(), usage.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	r := usage.Build(rows, "day", usage.Filter{})
	if len(r.Groups) != 2 || r.Groups[0].Key != "2026-11-20" || r.Groups[0].CacheReadTokens != 40 || r.Groups[0].CostUSD != nil {
		t.Fatalf("by day %+v", r.Groups)
	}
	if g := r.Groups[1]; g.Key != "2026-11-21" || g.Messages != 1 || *g.CostUSD != 0.5 || g.InputTokens != 10 {
		t.Fatalf("by day %+v", r.Groups)
	}
	if r.Total.Messages != 2 || r.Total.DurationMS != 12 || r.Total.Unpriced != 1 {
		t.Fatalf("total %+v", r.Total)
	}
}
