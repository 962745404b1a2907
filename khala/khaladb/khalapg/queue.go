package khalapg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/workflow"
)

// Lock order, so that no two transactions wait for each other in a cycle:
//
//	UpdateThread: thread row → its open turns (in step order) → its event counter
//	Claim:        turn and its thread's event counter, together, SKIP LOCKED
//	Heartbeat:    one turn
//
// Claim never waits: a turn whose row or counter another transaction
// holds is skipped, and that transaction wakes the queue when it commits
// (publishChange, and the claim's own count of queued siblings below).
// UpdateThread waits only for locks whose holders wait for nothing more
// (a claim, a heartbeat); its new turns are rows nobody else can see.

// claimSQL leases up to $1 queued turns in one statement and records a
// turn.started event for each. $4 holds one fresh claim id per turn, $5
// the agent each claim id is for (several agents' claims may share a
// statement: claimbatch.go); $7 and $8 are the repository filter.
var claimSQL = `WITH ` + pickedCTE("$1", "$2", "$3", "$7", "$8") + `, numbered AS (
	SELECT thread, step, row_number() OVER (ORDER BY thread, step) AS rn FROM picked
), claimed AS (
	UPDATE khala_turns t SET state = 'claimed', claim = ($4::text[])[n.rn], agent = ($5::text[])[n.rn], claimed_at = $6,
		lease_expires = $6 + t.lease, idle_at = 0, rev = t.rev + 1
	FROM numbered n WHERE t.thread = n.thread AND t.step = n.step
	RETURNING t.*
), counts AS (
	SELECT thread, count(*) AS k FROM claimed GROUP BY thread
), seqs AS (
	UPDATE khala_event_seqs s SET last_seq = s.last_seq + c.k FROM counts c WHERE s.thread = c.thread
	RETURNING s.thread, s.last_seq - c.k AS base
), events AS (
	INSERT INTO khala_events (thread, seq, at, type, step, role, agent, adapter, message, status, turn, claim, attempt)
	SELECT c.thread, s.base + row_number() OVER (PARTITION BY c.thread ORDER BY c.step), $6, 'turn.started', c.step,
		c.role, c.agent, '', '', '', 'thread-' || c.thread || '.' || c.step, c.claim, c.attempt
	FROM claimed c JOIN seqs s ON s.thread = c.thread
)
SELECT ` + turnCols + `,
	` + queuedSiblings + ` - (SELECT k FROM counts WHERE counts.thread = c.thread),
	` + claimViewCols + `
ORDER BY priority DESC, first_queued, thread, step`

// claimOneSQL is claimSQL for one turn ($1, $2, $6, $7: filters; $3:
// the claim id; $4: agent; $5: now), without the numbering a claim of several
// turns needs: most claims are of one turn (an agent's one free slot).
var claimOneSQL = `WITH ` + pickedCTE("1", "$1", "$2", "$6", "$7") + `, claimed AS (
	UPDATE khala_turns t SET state = 'claimed', claim = $3, agent = $4, claimed_at = $5,
		lease_expires = $5 + t.lease, idle_at = 0, rev = t.rev + 1
	FROM picked p WHERE t.thread = p.thread AND t.step = p.step
	RETURNING t.*
), seqs AS (
	UPDATE khala_event_seqs s SET last_seq = s.last_seq + 1 FROM claimed c WHERE s.thread = c.thread
	RETURNING s.last_seq
), events AS (
	INSERT INTO khala_events (thread, seq, at, type, step, role, agent, adapter, message, status, turn, claim, attempt)
	SELECT c.thread, s.last_seq, $5, 'turn.started', c.step,
		c.role, c.agent, '', '', '', 'thread-' || c.thread || '.' || c.step, c.claim, c.attempt
	FROM claimed c, seqs s
)
SELECT ` + turnCols + `,
	` + queuedSiblings + ` - 1,
	` + claimViewCols

// queuedSiblings counts a claimed turn's thread's open turns still queued
// in the claim's snapshot (its own included), found by the thread's key.
// The state is a filter, not a condition: a condition would match the
// queue index's predicate, and a plan made while the table's statistics
// are new (a fresh Khala's, kept for the connection's life) then walks
// that whole index for one thread, every claim.
const queuedSiblings = `(SELECT count(*) FILTER (WHERE q.state = 'queued') FROM khala_turns q
		WHERE q.thread = c.thread AND q.step = ANY (th.th_pending))`

// warmClaims plans the claims once (EXPLAIN: nothing runs, nothing is
// locked) on a new pool connection. A fresh backend's first statement over
// these tables loads their catalog entries, which costs milliseconds:
// paid here, not by the long poll a turn queued on another replica wakes.
// No statement is kept prepared, so a later migration cannot leave one
// stale. A failure (before the schema is migrated) changes nothing.
func warmClaims(ctx context.Context, conn *pgx.Conn) error {
	none := []string{}
	if _, err := conn.Exec(ctx, "EXPLAIN "+claimOneSQL, pgx.QueryExecModeSimpleProtocol, none, none, "warm", "warm", int64(0), "", none); err == nil {
		_, _ = conn.Exec(ctx, "EXPLAIN "+claimSQL, pgx.QueryExecModeSimpleProtocol, 2, none, none, []string{"warm", "warm"}, []string{"warm", "warm"}, int64(0), "", none)
	}
	return nil
}

// pickedCTE picks up to limit queued turns, higher priority first, then
// oldest first (the queue index's order: khala_turns_queue), of the
// workflows and roles (text[] parameters; empty: any) and repositories
// (repoFilter's mode and patterns), locking each with
// its thread's event counter and skipping any another transaction holds.
func pickedCTE(limit, workflows, roles, repoMode, repoRes string) string {
	return `picked AS (
	SELECT t.thread, t.step FROM khala_turns t JOIN khala_event_seqs s ON s.thread = t.thread
	WHERE t.state = 'queued'
		AND (cardinality(` + workflows + `::text[]) = 0 OR t.workflow = ANY(` + workflows + `::text[]))
		AND (cardinality(` + roles + `::text[]) = 0 OR t.role = ANY(` + roles + `::text[]) OR t.role = '` + khaladb.MergeRole + `')
		AND (` + repoMode + `::text = '' OR t.repo = ''
			OR (` + repoMode + `::text = 'declared' AND t.repo_declared)
			OR (` + repoMode + `::text = 'globs' AND t.repo ~ ANY(` + repoRes + `::text[])))
	ORDER BY t.priority DESC, t.first_queued, t.thread, t.step
	LIMIT ` + limit + `
	FOR UPDATE OF t, s SKIP LOCKED
)`
}

// claimViewCols end a claim's answer: per turn, the sibling count above,
// then what its thread's next change needs (fastpath.go), read in the
// claim's snapshot.
const claimViewCols = `COALESCE(th.th_version, 0), COALESCE(th.th_pending, '{}'), th.th_record,
	ARRAY(SELECT m.step FROM khala_messages m WHERE m.thread = c.thread ORDER BY m.step),
	(SELECT m.record FROM khala_messages m WHERE m.thread = c.thread ORDER BY m.step DESC LIMIT 1)
FROM claimed c LEFT JOIN LATERAL (SELECT version AS th_version, pending AS th_pending, record AS th_record
	FROM khala_threads WHERE n = c.thread) th ON true`

// claimStatement leases up to len(claims) turns matching q's filters, one
// per claim id, each for the agent beside its id, at q.Now.
func (p *Store) claimStatement(ctx context.Context, q khaladb.ClaimQuery, claims, agents []string) ([]khaladb.Turn, error) {
	wfs, roles := q.Workflows, q.Roles
	if wfs == nil {
		wfs = []string{}
	}
	if roles == nil {
		roles = []string{}
	}
	repoMode, repoRes := repoFilter(q.Repos)
	// One statement, its own transaction. Its plan is made once per
	// connection without sorts or bitmap scans (see Open): the
	// queue's statistics lag behind a burst of new threads, and the only
	// plan wanted at any size walks the queue index in order and stops at
	// the first turns that can be locked.
	siblings := false
	var views []claimView
	var rows pgx.Rows
	if len(claims) == 1 {
		rows, _ = p.pool.Query(ctx, claimOneSQL, wfs, roles, claims[0], agents[0], shared.Nanos(q.Now), repoMode, repoRes)
	} else {
		rows, _ = p.pool.Query(ctx, claimSQL, len(claims), wfs, roles, claims, agents, shared.Nanos(q.Now), repoMode, repoRes)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.Turn, error) {
		var (
			left int64
			cv   claimView
		)
		t, err := scanTurn(rowWithExtra{r, []any{&left, &cv.version, &cv.pending, &cv.record, &cv.steps, &cv.last}})
		if err == nil && cv.record != nil {
			t.Head, err = threadHead(cv.record)
		}
		siblings = siblings || left > 0
		cv.turns = []khaladb.Turn{t}
		views = append(views, cv)
		return t, err
	})
	if err == nil {
		p.views.claimed(views)
	}
	if err != nil {
		return nil, p.fail("claim", err)
	}
	topics := make([]string, 0, len(out)+1)
	for _, t := range out {
		topics = append(topics, khaladb.ThreadTopic(t.Thread))
	}
	if siblings {
		// Turns of these threads were skipped while this claim held
		// their counters: whoever waits may take them now.
		topics = append(topics, khaladb.TopicQueue)
	}
	p.publish(topics...)
	return out, p.fail("", nil)
}

// threadHead reads a claimed turn's thread head from the thread's record,
// which the claim read: the server need not read the thread again.
func threadHead(record []byte) (*khaladb.ThreadHead, error) {
	var th struct {
		Workspace *workflow.Workspace `json:"workspace"`
		Round     *khaladb.Round      `json:"round"`
	}
	if err := json.Unmarshal(record, &th); err != nil {
		return nil, fmt.Errorf("thread record: %w", err)
	}
	return &khaladb.ThreadHead{Workspace: th.Workspace, Round: th.Round}, nil
}

// rowWithExtra scans a turn followed by more columns.
type rowWithExtra struct {
	pgx.Row
	extra []any
}

func (r rowWithExtra) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// heartbeatSQL moves a lease's stored expiry, when $5 holds it under
// claim $3, only when it would end within a lease (now + lease is
// computed per row: lease_expires < $4 + lease), to two leases ahead
// (khaladb.HeartbeatExpiry); either way it returns the turn, as written
// or as it was. A heartbeat that writes nothing updates no row: its
// transaction takes no id, and its commit writes and flushes no WAL.
var heartbeatSQL = `WITH up AS (
	UPDATE khala_turns SET lease_expires = $4 + ` + strconv.Itoa(khaladb.LeaseAhead) + ` * lease, rev = rev + 1
	WHERE thread = $1 AND step = $2 AND claim = $3 AND agent = $5 AND state = 'claimed'
		AND lease_expires >= $4 AND lease_expires < $4 + lease
	RETURNING ` + turnCols + `
)
SELECT true, * FROM up
UNION ALL
SELECT false, ` + turnCols + ` FROM khala_turns WHERE thread = $1 AND step = $2 AND NOT EXISTS (SELECT 1 FROM up)`

// Heartbeat implements Storage.
func (p *Store) Heartbeat(ctx context.Context, turn, claim, agent string, now time.Time) (khaladb.Turn, error) {
	n, step, ok := pgTurnID(turn)
	if !ok {
		return khaladb.Turn{}, khaladb.ErrNotFound
	}
	var wrote bool
	t, err := scanTurn(rowFirst{p.pool.QueryRow(ctx, heartbeatSQL, int64(n), step, claim, shared.Nanos(now), agent), &wrote})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return khaladb.Turn{}, khaladb.ErrNotFound
	case err != nil:
		return khaladb.Turn{}, p.fail("heartbeat", err)
	case wrote:
		p.views.heartbeat(n, t)
		return t, p.fail("", nil)
	case t.Claim != claim:
		return khaladb.Turn{}, khaladb.ErrClaimLost
	case t.Agent != agent:
		return khaladb.Turn{}, khaladb.ErrNotHolder
	case t.State == khaladb.TurnCancelled:
		return t, p.fail("", nil) // the holder hears cancel: true
	case t.State != khaladb.TurnClaimed || now.After(t.LeaseExpires):
		return khaladb.Turn{}, khaladb.ErrClaimLost
	}
	return t, p.fail("", nil) // the stored expiry covers this heartbeat
}

// rowFirst scans one leading column, then a turn.
type rowFirst struct {
	pgx.Row
	first any
}

func (r rowFirst) Scan(dest ...any) error { return r.Row.Scan(append([]any{r.first}, dest...)...) }

// dueSQL lists what is due at $1, up to $2 of each kind: leases run
// out, turns idle too long, child turns to check.
const dueSQL = `(SELECT 'expired', thread, step, claim FROM khala_turns WHERE state = 'claimed' AND lease_expires <= $1
		ORDER BY lease_expires LIMIT $2)
	UNION ALL
	(SELECT 'idle', thread, step, '' FROM khala_turns WHERE state IN ('queued', 'waiting') AND idle_at > 0 AND idle_at <= $1
		ORDER BY idle_at LIMIT $2)
	UNION ALL
	(SELECT 'child', thread, step, '' FROM khala_turns WHERE state = 'child' AND lease_expires <= $1
		ORDER BY lease_expires LIMIT $2)`

// nextDueSQL is when something is next due after $1. Each part repeats
// its partial index's predicate (idle_at > 0 too): a generic plan cannot
// prove it from $1, and without it walks the whole table.
const nextDueSQL = `SELECT least((SELECT min(lease_expires) FROM khala_turns WHERE state = 'claimed' AND lease_expires > $1),
	(SELECT min(idle_at) FROM khala_turns WHERE state IN ('queued', 'waiting') AND idle_at > 0 AND idle_at > $1),
	(SELECT min(lease_expires) FROM khala_turns WHERE state = 'child' AND lease_expires > $1))`

// Due implements Storage.
func (p *Store) Due(ctx context.Context, now time.Time, limit int) ([]khaladb.DueTurn, time.Time, error) {
	b := &pgx.Batch{}
	b.Queue(dueSQL, shared.Nanos(now), limit+1)
	b.Queue(nextDueSQL, shared.Nanos(now))
	br := p.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, _ := br.Query()
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.DueTurn, error) {
		var d khaladb.DueTurn
		var n int64
		var step int
		err := r.Scan(&d.Kind, &n, &step, &d.Claim)
		d.Thread = khaladb.ThreadID(uint64(n))
		d.Turn = khaladb.TurnID(d.Thread, step)
		return d, err
	})
	if err != nil {
		return nil, time.Time{}, p.fail("read due turns", err)
	}
	var next *int64
	if err := br.QueryRow().Scan(&next); err != nil {
		return nil, time.Time{}, p.fail("read due turns", err)
	}
	var at time.Time
	if next != nil {
		at = shared.FromNanos(*next)
	}
	if len(out) > limit {
		out, at = out[:limit], now // more is due now
	}
	return out, at, p.fail("", nil)
}

// Stats implements Storage.
func (p *Store) Stats(ctx context.Context) (khaladb.Stats, error) {
	var s khaladb.Stats
	err := p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM khala_turns WHERE state = 'queued'),
		(SELECT count(*) FROM khala_turns WHERE state = 'claimed'),
		(SELECT count(*) FROM khala_threads WHERE status = 'running'),
		(SELECT count(*) FROM khala_turns WHERE state = 'waiting')`).Scan(&s.Queued, &s.Claimed, &s.Running, &s.Waiting)
	return s, p.fail("count", err)
}

// ClaimWebhooks implements Storage: deliveries are leased with SKIP
// LOCKED, so each is in flight at one replica at a time.
func (p *Store) ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, max int) ([]khaladb.Webhook, time.Time, error) {
	b := &pgx.Batch{}
	b.Queue(`WITH due AS (SELECT id FROM khala_webhooks WHERE next_at <= $1 ORDER BY next_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE khala_webhooks w SET next_at = $2 FROM due WHERE w.id = due.id
		RETURNING w.id, w.url, w.payload, w.attempts, w.next_at, w.last_error, w.created`, shared.Nanos(now), shared.Nanos(now.Add(lease)), max)
	b.Queue("SELECT min(next_at) FROM khala_webhooks WHERE next_at > $1", shared.Nanos(now))
	br := p.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, _ := br.Query()
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.Webhook, error) {
		var (
			w                 khaladb.Webhook
			id, next, created int64
			payload           []byte
		)
		if err := r.Scan(&id, &w.URL, &payload, &w.Attempts, &next, &w.LastErr, &created); err != nil {
			return w, err
		}
		w.ID, w.NextAt, w.Created = uint64(id), shared.FromNanos(next), shared.FromNanos(created)
		return w, json.Unmarshal(payload, &w.Payload)
	})
	if err != nil {
		return nil, time.Time{}, p.fail("claim webhooks", err)
	}
	var next *int64
	if err := br.QueryRow().Scan(&next); err != nil {
		return nil, time.Time{}, p.fail("claim webhooks", err)
	}
	var at time.Time
	if next != nil {
		at = shared.FromNanos(*next)
	}
	return out, at, p.fail("", nil)
}

// FinishWebhook implements Storage.
func (p *Store) FinishWebhook(ctx context.Context, id uint64, attempts int, retryAt time.Time, lastErr string) error {
	var err error
	if retryAt.IsZero() {
		_, err = p.pool.Exec(ctx, "DELETE FROM khala_webhooks WHERE id = $1", int64(id))
	} else {
		_, err = p.pool.Exec(ctx, "UPDATE khala_webhooks SET attempts = $2, next_at = $3, last_error = $4 WHERE id = $1",
			int64(id), attempts, shared.Nanos(retryAt), lastErr)
		if err == nil {
			// Deliverers sleep until the next due time they know: wake them.
			p.publish(khaladb.TopicWebhooks)
		}
	}
	return p.fail("record a webhook delivery", err)
}
