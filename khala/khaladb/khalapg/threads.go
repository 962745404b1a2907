package khalapg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nerve-agents/nerve/workflow"
)

// A view is read in one round trip (BEGIN, three reads, COMMIT in one
// batch) from one snapshot, and a change is written with its COMMIT in
// one more: statements that find a row moved since it was read call
// khala_stale(), which aborts the transaction before the COMMIT runs.

// errStale says a change was not written because something it read moved.
var errStale = errors.New("stale")

// staleCode is the SQLSTATE khala_stale() raises.
const staleCode = "KH001"

func isStale(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == staleCode
}

// NextThreadID implements Storage: a sequence, so every replica draws
// from one counter, and an id drawn and never used is a gap.
func (p *Store) NextThreadID(ctx context.Context) (string, error) {
	var n int64
	err := p.pool.QueryRow(ctx, "SELECT nextval('khala_thread_ids')").Scan(&n)
	return khaladb.ThreadID(uint64(n)), p.fail("reserve a thread id", err)
}

// CreateThread implements Storage.
func (p *Store) CreateThread(ctx context.Context, c *khaladb.ThreadChange) error {
	n, ok := pgThreadID(c.Thread.ID)
	if !ok {
		return fmt.Errorf("create thread: bad id %q", c.Thread.ID)
	}
	st, err := changeStatement(n, c, 0)
	if err != nil {
		return err
	}
	// One statement: its own transaction.
	err = scanChange(p.pool.QueryRow(ctx, st.sql, st.args...), c)
	if isStale(err) {
		return fmt.Errorf("create thread: %s already exists", c.Thread.ID)
	}
	if err != nil {
		return p.fail("create thread", err)
	}
	p.publishChange(c, nil)
	return nil
}

// UpdateThread implements Storage. A change is made from the view its
// turn's claim read, when this replica has one (updateFast), and is
// otherwise, or when that view is found stale, made from a locked read.
// The thread's row lock serialises its changes across replicas. Its
// open turns are locked too: a heartbeat waits for the change (and then
// finds the turn as the change left it), a claim skips them, so a change
// is not invalidated by a heartbeat storm. Turns still carry their
// revision, checked as they are written: a change made from a view that
// moved anyway is stale, and fn runs again.
func (p *Store) UpdateThread(ctx context.Context, id string, fn func(*khaladb.ThreadView) (*khaladb.ThreadChange, error)) error {
	n, ok := pgThreadID(id)
	if !ok {
		return khaladb.ErrNotFound
	}
	if done, err := p.updateFast(ctx, n, fn); done {
		return err
	}
	for range 20 {
		v, c, err := p.updateOnce(ctx, n, fn)
		if errors.Is(err, errStale) {
			continue
		}
		if err != nil || c == nil {
			return err
		}
		p.publishChange(c, v)
		return nil
	}
	return khaladb.ErrConflict
}

func (p *Store) updateOnce(ctx context.Context, n uint64, fn func(*khaladb.ThreadView) (*khaladb.ThreadChange, error)) (*khaladb.ThreadView, *khaladb.ThreadChange, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, p.fail("update thread", err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	cached := p.queueView(b, n, "FOR NO KEY UPDATE")
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var pv *pgView
	if err == nil {
		pv, err = p.readView(br, n, cached)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = p.fillMessages(ctx, conn, n, pv)
	}
	if err != nil {
		rollback(conn)
		if errors.Is(err, khaladb.ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, p.fail("read thread", err)
	}
	v := &pv.ThreadView
	c, err := fn(v)
	if err != nil || c == nil {
		rollback(conn)
		return v, nil, err
	}
	st, err := changeStatement(n, c, v.Thread.Version)
	if err != nil {
		rollback(conn)
		return v, nil, err
	}
	wb := &pgx.Batch{}
	wb.Queue(st.sql, st.args...)
	wb.Queue("COMMIT")
	br = conn.SendBatch(ctx, wb)
	err = scanChange(br.QueryRow(), c)
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		rollback(conn)
		if isStale(err) {
			return v, nil, errStale
		}
		return v, nil, p.fail("update thread", err)
	}
	p.views.changed(p, n, v, c, st)
	return v, c, p.fail("", nil)
}

// rollback ends a failed transaction so the connection can be reused; a
// connection that cannot is closed, and the pool drops it.
func rollback(conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		conn.Conn().Close(ctx)
	}
}

// publishChange wakes whoever waits on what c changed (v: the view it was
// made from). A claim skips the turns of a thread whose change is being
// committed, so queued turns the change did not write wake the queue too.
func (p *Store) publishChange(c *khaladb.ThreadChange, v *khaladb.ThreadView) {
	topics := []string{khaladb.ThreadTopic(c.Thread.ID)}
	queued := slices.ContainsFunc(c.Turns, func(t khaladb.Turn) bool { return t.State == khaladb.TurnQueued })
	if v != nil && !c.Thread.Ended() {
		queued = queued || slices.ContainsFunc(v.Turns, func(t khaladb.Turn) bool { return t.State == khaladb.TurnQueued })
	}
	if queued {
		topics = append(topics, khaladb.TopicQueue)
	}
	if len(c.Webhooks) > 0 {
		topics = append(topics, khaladb.TopicWebhooks)
	}
	p.publish(topics...)
}

// Turn implements Storage.
func (p *Store) Turn(ctx context.Context, id string) (khaladb.Turn, error) {
	n, step, ok := pgTurnID(id)
	if !ok {
		return khaladb.Turn{}, khaladb.ErrNotFound
	}
	t, err := scanTurn(p.pool.QueryRow(ctx, "SELECT "+turnCols+" FROM khala_turns WHERE thread = $1 AND step = $2", int64(n), step))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, khaladb.ErrNotFound
	}
	return t, p.fail("read turn "+id, err)
}

// Threads implements Storage.
func (p *Store) Threads(ctx context.Context, q khaladb.ThreadQuery) ([]khaladb.Thread, error) {
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = -1 // LIMIT NULL: all
	}
	rows, err := p.pool.Query(ctx, `SELECT n, workflow, version, record FROM khala_threads
		WHERE ($1 = '' OR workflow = $1) AND ($2 = '' OR status = $2)
		ORDER BY n DESC LIMIT NULLIF($3, -1)`, q.Workflow, q.Status, limit)
	if err != nil {
		return nil, p.fail("list threads", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.Thread, error) {
		var t khaladb.Thread
		var n, version int64
		var wf string
		var rec []byte
		if err := r.Scan(&n, &wf, &version, &rec); err != nil {
			return t, err
		}
		if err := json.Unmarshal(rec, &t); err != nil {
			return khaladb.Unreadable(khaladb.ThreadID(uint64(n)), wf, fmt.Errorf("thread record: %w", err)), nil
		}
		t.Version = uint64(version)
		return t, nil
	})
	return out, p.fail("list threads", err)
}

// Events implements Storage.
func (p *Store) Events(ctx context.Context, thread string, after uint64, limit int) ([]workflow.Event, error) {
	n, ok := pgThreadID(thread)
	if !ok {
		return nil, khaladb.ErrNotFound
	}
	lim := int64(limit)
	if lim <= 0 {
		lim = -1
	}
	rows, err := p.pool.Query(ctx, `SELECT seq, at, type, step, role, agent, adapter, message, status, turn, claim, attempt
		FROM khala_events WHERE thread = $1 AND seq > $2 ORDER BY seq LIMIT NULLIF($3, -1)`, int64(n), int64(after), lim)
	if err != nil {
		return nil, p.fail("read events", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (workflow.Event, error) {
		e := workflow.Event{Thread: thread}
		var seq, at int64
		err := r.Scan(&seq, &at, &e.Type, &e.Step, &e.Role, &e.Agent, &e.Adapter, &e.Message, &e.Status, &e.Turn, &e.Claim, &e.Attempt)
		e.Seq, e.At = uint64(seq), time.Unix(0, at).UTC()
		return e, err
	})
	return out, p.fail("read events", err)
}
