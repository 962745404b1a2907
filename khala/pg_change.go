package khala

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// turnCols are a turn's columns in the order scanTurn reads them.
const turnCols = `thread, step, workflow, role, state, rev, attempt, max_attempts, lease, idle, claim, agent,
	first_queued, queued_at, claimed_at, lease_expires, idle_at, instruction, prompt`

func scanTurn(row pgx.Row) (Turn, error) {
	var (
		t                                       Turn
		n, rev, lease, idle, fq, qa, ca, le, ia int64
	)
	err := row.Scan(&n, &t.Step, &t.Workflow, &t.Role, &t.State, &rev, &t.Attempt, &t.MaxAttempts, &lease, &idle,
		&t.Claim, &t.Agent, &fq, &qa, &ca, &le, &ia, &t.Instruction, &t.Prompt)
	if err != nil {
		return t, err
	}
	t.Thread = threadID(uint64(n))
	t.ID = TurnID(t.Thread, t.Step)
	t.Rev, t.Lease, t.Idle = uint64(rev), time.Duration(lease), time.Duration(idle)
	t.FirstQueued, t.QueuedAt, t.ClaimedAt = fromNanos(fq), fromNanos(qa), fromNanos(ca)
	t.LeaseExpires, t.IdleAt = fromNanos(le), fromNanos(ia)
	return t, nil
}

// changeSQL writes a thread change in one statement: the thread (created
// when $6), its turns (new ones inserted; changed ones only at the
// revision read: k.rev = EXCLUDED.rev - 1), messages, events numbered
// after the thread's counter, and webhooks. Anything out of place (a turn
// moved, a thread that already exists) calls khala_stale(), so nothing is
// written. The row locks it may wait for are the counter's, which only a
// claim (which never waits) holds: the order of its parts cannot deadlock.
const changeSQL = `WITH th AS (
	UPDATE khala_threads SET workflow = $2, status = $3, version = $4, record = $5, pending = $44
	WHERE n = $1 AND NOT $6 RETURNING 1
), thi AS (
	INSERT INTO khala_threads (n, workflow, status, version, record, pending) SELECT $1, $2, $3, $4, $5, $44 WHERE $6
	ON CONFLICT (n) DO NOTHING RETURNING 1
), tu AS (
	INSERT INTO khala_turns AS k (` + turnCols + `)
	SELECT $1, u.* FROM unnest($7::int[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::int[], $13::int[],
		$14::bigint[], $15::bigint[], $16::text[], $17::text[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[],
		$22::bigint[], $23::text[], $24::text[]) AS u
	ON CONFLICT (thread, step) DO UPDATE SET workflow = EXCLUDED.workflow, role = EXCLUDED.role, state = EXCLUDED.state,
		rev = EXCLUDED.rev, attempt = EXCLUDED.attempt, max_attempts = EXCLUDED.max_attempts, lease = EXCLUDED.lease,
		idle = EXCLUDED.idle, claim = EXCLUDED.claim, agent = EXCLUDED.agent, first_queued = EXCLUDED.first_queued,
		queued_at = EXCLUDED.queued_at, claimed_at = EXCLUDED.claimed_at, lease_expires = EXCLUDED.lease_expires,
		idle_at = EXCLUDED.idle_at, instruction = EXCLUDED.instruction, prompt = EXCLUDED.prompt
	WHERE k.rev = EXCLUDED.rev - 1
	RETURNING 1
), ms AS (
	INSERT INTO khala_messages (thread, step, record) SELECT $1, s, r FROM unnest($25::int[], $26::bytea[]) AS u(s, r)
), seqs AS (
	UPDATE khala_event_seqs SET last_seq = last_seq + cardinality($27::bigint[])
	WHERE thread = $1 AND NOT $6 AND cardinality($27::bigint[]) > 0
	RETURNING last_seq - cardinality($27::bigint[]) AS base
), seqi AS (
	INSERT INTO khala_event_seqs (thread, last_seq) SELECT $1, cardinality($27::bigint[]) WHERE $6 RETURNING 0::bigint AS base
), ev AS (
	INSERT INTO khala_events (thread, seq, at, type, step, role, agent, adapter, message, status, turn, claim, attempt)
	SELECT $1, b.base + u.ord, u.at, u.type, u.step, u.role, u.agent, u.adapter, u.message, u.status, u.turn, u.claim, u.attempt
	FROM (SELECT base FROM seqs UNION ALL SELECT base FROM seqi) b,
		unnest($27::bigint[], $28::text[], $29::int[], $30::text[], $31::text[], $32::text[], $33::text[], $34::text[],
			$35::text[], $36::text[], $37::int[]) WITH ORDINALITY AS u(at, type, step, role, agent, adapter, message, status, turn, claim, attempt, ord)
	RETURNING seq
), wh AS (
	INSERT INTO khala_webhooks (url, payload, attempts, next_at, last_error, created)
	SELECT * FROM unnest($38::text[], $39::bytea[], $40::int[], $41::bigint[], $42::text[], $43::bigint[]) RETURNING id
)
SELECT CASE WHEN (SELECT count(*) FROM th) + (SELECT count(*) FROM thi) = 1
		AND (SELECT count(*) FROM tu) = cardinality($7::int[]) THEN 1 ELSE khala_stale() END,
	ARRAY(SELECT seq FROM ev ORDER BY seq), ARRAY(SELECT id FROM wh ORDER BY id)`

// changeArgs are changeSQL's arguments for c to thread n, stored at
// version (0: a new thread).
func changeArgs(n uint64, c *ThreadChange, version uint64) ([]any, error) {
	rec, err := json.Marshal(c.Thread)
	if err != nil {
		return nil, err
	}
	args := []any{int64(n), c.Thread.Workflow, c.Thread.Status, int64(version + 1), rec, version == 0}
	k := len(c.Turns)
	tSteps, tAttempt, tMax := make([]int32, k), make([]int32, k), make([]int32, k)
	tWf, tRole, tState, tClaim, tAgent, tInstr, tPrompt := make([]string, k), make([]string, k), make([]string, k),
		make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	tRev, tLease, tIdle, tFQ, tQA, tCA, tLE, tIA := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k),
		make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k)
	for i := range c.Turns {
		t := &c.Turns[i]
		tSteps[i], tWf[i], tRole[i], tState[i], tRev[i] = int32(t.Step), t.Workflow, t.Role, t.State, int64(t.Rev+1)
		tAttempt[i], tMax[i], tLease[i], tIdle[i] = int32(t.Attempt), int32(t.MaxAttempts), int64(t.Lease), int64(t.Idle)
		tClaim[i], tAgent[i], tFQ[i], tQA[i], tCA[i] = t.Claim, t.Agent, nanos(t.FirstQueued), nanos(t.QueuedAt), nanos(t.ClaimedAt)
		tLE[i], tIA[i], tInstr[i], tPrompt[i] = nanos(t.LeaseExpires), nanos(t.IdleAt), t.Instruction, t.Prompt
		if !t.Open() {
			tPrompt[i] = "" // a closed turn is served to no one again
		}
	}
	args = append(args, tSteps, tWf, tRole, tState, tRev, tAttempt, tMax, tLease, tIdle, tClaim, tAgent, tFQ, tQA, tCA, tLE, tIA, tInstr, tPrompt)
	mSteps, mRecs := make([]int32, len(c.Messages)), make([][]byte, len(c.Messages))
	for i, m := range c.Messages {
		if mRecs[i], err = json.Marshal(m); err != nil {
			return nil, err
		}
		mSteps[i] = int32(m.Step)
	}
	args = append(args, mSteps, mRecs)
	k = len(c.Events)
	at, step, attempt := make([]int64, k), make([]int32, k), make([]int32, k)
	typ, role, agent, adapter, msg, status, turn, claim := make([]string, k), make([]string, k), make([]string, k),
		make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	for i, e := range c.Events {
		at[i], step[i], attempt[i] = nanos(e.At), int32(e.Step), int32(e.Attempt)
		typ[i], role[i], agent[i], adapter[i], msg[i] = e.Type, e.Role, e.Agent, e.Adapter, e.Message
		status[i], turn[i], claim[i] = e.Status, e.Turn, e.Claim
	}
	args = append(args, at, typ, step, role, agent, adapter, msg, status, turn, claim, attempt)
	k = len(c.Webhooks)
	urls, payloads, attempts := make([]string, k), make([][]byte, k), make([]int32, k)
	next, lastErr, created := make([]int64, k), make([]string, k), make([]int64, k)
	for i, h := range c.Webhooks {
		if payloads[i], err = json.Marshal(h.Payload); err != nil {
			return nil, err
		}
		urls[i], attempts[i], next[i], lastErr[i], created[i] = h.URL, int32(h.Attempts), nanos(h.NextAt), h.LastErr, nanos(h.Created)
	}
	pending := make([]int32, len(c.Thread.Pending))
	for i, t := range c.Thread.Pending {
		pending[i] = int32(t.Step)
	}
	return append(args, urls, payloads, attempts, next, lastErr, created, pending), nil
}

// scanChange reads changeSQL's answer into c: event seqs, webhook ids.
func scanChange(row pgx.Row, c *ThreadChange) error {
	var (
		ok        int
		seqs, ids []int64
	)
	if err := row.Scan(&ok, &seqs, &ids); err != nil {
		return err
	}
	if len(seqs) != len(c.Events) || len(ids) != len(c.Webhooks) {
		return fmt.Errorf("thread %s: %d of %d events and %d of %d webhooks written", c.Thread.ID,
			len(seqs), len(c.Events), len(ids), len(c.Webhooks))
	}
	for i := range seqs {
		c.Events[i].Seq = uint64(seqs[i])
	}
	for i := range ids {
		c.Webhooks[i].ID = uint64(ids[i])
	}
	return nil
}

// pgThreadID is ParseThreadID within the bigint key's range: an id past it
// names no thread (instead of failing to encode).
func pgThreadID(id string) (uint64, bool) {
	n, ok := ParseThreadID(id)
	return n, ok && n <= math.MaxInt64
}

// pgTurnID is ParseTurnID within the keys' ranges.
func pgTurnID(id string) (uint64, int, bool) {
	_, n, step, ok := ParseTurnID(id)
	return n, step, ok && n <= math.MaxInt64 && step <= math.MaxInt32
}
