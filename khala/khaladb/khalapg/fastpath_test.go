package khalapg

import (
	"context"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/khala/pgtest"
)

// A change made from a view that moved stops at the thread's version
// check: it reports stale at once and waits for no lock another
// transaction holds on its turns (which could otherwise close a cycle with
// that transaction).
func TestPostgresStaleChangeTakesNoTurnLock(t *testing.T) {
	pg := openPG(t, pgtest.Database(t))
	id := khaladbtest.StartThread(t, pg, "pair", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"}).Thread.ID
	ctx := context.Background()
	v, err := pg.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := pgThreadID(id)
	holder, err := pg.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, "SELECT 1 FROM khala_turns WHERE thread = $1 AND step = 1 FOR UPDATE", int64(n)); err != nil {
		t.Fatal(err)
	}
	write := func(version uint64) (time.Duration, error) {
		tk := v.Turns[0]
		tk.State = khaladb.TurnCancelled
		c := &khaladb.ThreadChange{Thread: v.Thread, Turns: []khaladb.Turn{tk}}
		st, err := changeStatement(n, c, version)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		err = scanChange(pg.pool.QueryRow(wctx, st.sql, st.args...), c)
		return time.Since(start), err
	}
	if took, err := write(v.Thread.Version + 1); !isStale(err) || took > 500*time.Millisecond {
		t.Fatalf("a change from a moved view: %v after %s; want stale at once", err, took)
	}
	// At the current version the same change waits for the turn's lock.
	if _, err := write(v.Thread.Version); err == nil || isStale(err) {
		t.Fatalf("a change at the current version while its turn is locked: %v; want a timeout", err)
	}
}

// A claim reads its turns' thread (for the answer's fast path), so it
// returns the thread's workspace with each turn: the server reads the
// thread no more. The workspace itself is checked by the contract's
// Workspace test; here, that a bare thread's turn says it has none.
func TestPostgresClaimReturnsThreadHead(t *testing.T) {
	pg := openPG(t, pgtest.Database(t))
	khaladbtest.StartThread(t, pg, "solo", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	turns := khaladbtest.ClaimAll(t, pg, "agent", khaladbtest.Epoch)
	if len(turns) != 1 {
		t.Fatalf("claimed %d turns, want 1", len(turns))
	}
	if h := turns[0].Head; h == nil || h.Workspace != nil || h.Round != nil {
		t.Fatalf("head %+v, want one without a workspace", h)
	}
}
