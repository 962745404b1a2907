package khalapg

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/workflow"
)

// turnCols are a turn's columns in the order scanTurn reads them.
const turnCols = `thread, step, workflow, role, state, rev, attempt, max_attempts, lease, idle, claim, agent,
	first_queued, queued_at, claimed_at, lease_expires, idle_at, instruction, prompt, child, priority, repo, repo_declared`

func scanTurn(row pgx.Row) (khaladb.Turn, error) {
	var (
		t                                       khaladb.Turn
		n, rev, lease, idle, fq, qa, ca, le, ia int64
	)
	err := row.Scan(&n, &t.Step, &t.Workflow, &t.Role, &t.State, &rev, &t.Attempt, &t.MaxAttempts, &lease, &idle,
		&t.Claim, &t.Agent, &fq, &qa, &ca, &le, &ia, &t.Instruction, &t.Prompt, &t.Child, &t.Priority,
		&t.Repo, &t.RepoDeclared)
	if err != nil {
		return t, err
	}
	t.Thread = khaladb.ThreadID(uint64(n))
	t.ID = khaladb.TurnID(t.Thread, t.Step)
	t.Rev, t.Lease, t.Idle = uint64(rev), time.Duration(lease), time.Duration(idle)
	t.FirstQueued, t.QueuedAt, t.ClaimedAt = shared.FromNanos(fq), shared.FromNanos(qa), shared.FromNanos(ca)
	t.LeaseExpires, t.IdleAt = shared.FromNanos(le), shared.FromNanos(ia)
	return t, nil
}

// changeStatement is one statement that writes change c of thread n,
// stored at version (0: a new thread), with its arguments: the thread
// (inserted when new; updated only at the version read), its turns (new
// ones inserted; changed ones only at the revision read: k.rev =
// EXCLUDED.rev - 1), messages (new steps only), events numbered after the
// thread's counter, and webhooks. Anything out of place (the thread or a
// turn moved, a thread that already exists, a message already there)
// calls khala_stale(), so nothing is written. After a locked read, the
// only row lock it may wait for is the counter's, which only a claim
// (which never waits) holds; made from a claim's view, it locks the thread
// row first, then turns, then the counter: a locked read's order.
//
// The statement has only the parts c needs: the database initialises
// every node of a plan at each execution, cached plan or not, and most
// changes (an answer: the thread, a turn or two, one message, a few
// events) need half of them. There are at most 64 texts, each built once
// and prepared once per connection.
func changeStatement(n uint64, c *khaladb.ThreadChange, version uint64) (*changeStmt, error) {
	st := &changeStmt{pending: make([]int32, len(c.Thread.Pending)), messages: make([][]byte, len(c.Messages))}
	var err error
	if st.record, err = json.Marshal(c.Thread); err != nil {
		return nil, err
	}
	for i, t := range c.Thread.Pending {
		st.pending[i] = int32(t.Step)
	}
	parts := changePartsOf(c, version == 0)
	// In the order changeText numbers them.
	args := []any{int64(n), c.Thread.Workflow, c.Thread.Status, int64(version + 1), st.record, st.pending}
	if parts&partTurns != 0 {
		args = append(append(args, turnSteps(c.Turns)), turnArrays(c.Turns)...)
	}
	if parts&partMessages != 0 {
		steps := make([]int32, len(c.Messages))
		for i, m := range c.Messages {
			if st.messages[i], err = json.Marshal(m); err != nil {
				return nil, err
			}
			steps[i] = int32(m.Step)
		}
		args = append(args, steps, st.messages)
	}
	if parts&(partCreate|partEvents) != 0 {
		args = append(args, eventTimes(c.Events))
	}
	if parts&partEvents != 0 {
		args = append(args, eventArrays(c.Events)...)
	}
	if parts&partWebhooks != 0 {
		cols, err := webhookArrays(c.Webhooks)
		if err != nil {
			return nil, err
		}
		args = append(args, cols...)
	}
	if parts&partUsage != 0 {
		args = append(args, usageArrays(shardedRows(n, c.Spent), false)...)
	}
	st.sql, st.args = changeText(parts), args
	return st, nil
}

// changeStmt is a change's statement, and what it writes that the
// replica may keep (fastpath.go): the thread's record and pending
// steps, and its new messages, as stored.
type changeStmt struct {
	sql      string
	args     []any
	record   []byte
	pending  []int32
	messages [][]byte
}

// changeParts are the parts of a change's statement.
type changeParts uint8

const (
	partCreate changeParts = 1 << iota
	partTurns
	partMessages
	partEvents
	partWebhooks
	partUsage
	allChangeParts
)

func changePartsOf(c *khaladb.ThreadChange, create bool) changeParts {
	var p changeParts
	if create {
		p |= partCreate
	}
	if len(c.Turns) > 0 {
		p |= partTurns
	}
	if len(c.Messages) > 0 {
		p |= partMessages
	}
	if len(c.Events) > 0 {
		p |= partEvents
	}
	if len(c.Webhooks) > 0 {
		p |= partWebhooks
	}
	if len(c.Spent) > 0 {
		p |= partUsage
	}
	return p
}

var changeTexts [allChangeParts]atomic.Pointer[string]

// changeText is the statement of a change with parts p.
func changeText(p changeParts) string {
	if s := changeTexts[p].Load(); s != nil {
		return *s
	}
	s := buildChangeText(p)
	changeTexts[p].Store(&s)
	return s
}

func buildChangeText(p changeParts) string {
	var ph placeholders
	arg, args := ph.arg, ph.args
	thread, wf, status, ver, record, pend := arg(), arg(), arg(), arg(), arg(), arg()
	var ctes, checks []string
	create := p&partCreate != 0
	if create {
		ctes = append(ctes, `th AS (INSERT INTO khala_threads (n, workflow, status, version, record, pending)
	VALUES (`+thread+`, `+wf+`, `+status+`, `+ver+`, `+record+`, `+pend+`::int[]) ON CONFLICT (n) DO NOTHING RETURNING 1)`)
	} else {
		ctes = append(ctes, `th AS (UPDATE khala_threads SET workflow = `+wf+`, status = `+status+`, version = `+ver+`,
	record = `+record+`, pending = `+pend+`::int[] WHERE n = `+thread+` AND version = `+ver+` - 1 RETURNING 1)`)
	}
	checks = append(checks, "(SELECT count(*) FROM th) = 1")
	if p&partTurns != 0 {
		steps := arg()
		ctes = append(ctes, turnsUpsertCTE(`SELECT `+thread+`, u.* FROM unnest(`+steps+`::int[], `+turnArgs(args)+`) AS u`))
		checks = append(checks, "(SELECT count(*) FROM tu) = cardinality("+steps+"::int[])")
	}
	if p&partMessages != 0 {
		steps, recs := arg(), arg()
		ctes = append(ctes, `ms AS (INSERT INTO khala_messages (thread, step, record)
	SELECT `+thread+`, s, r FROM unnest(`+steps+`::int[], `+recs+`::bytea[]) AS u(s, r)
	ON CONFLICT (thread, step) DO NOTHING RETURNING 1)`)
		checks = append(checks, "(SELECT count(*) FROM ms) = cardinality("+steps+"::int[])")
	}
	seqs := "'{}'::bigint[]"
	if create || p&partEvents != 0 {
		at := arg()
		if create {
			// A new thread's event counter starts with it.
			ctes = append(ctes, `seq AS (INSERT INTO khala_event_seqs (thread, last_seq)
	VALUES (`+thread+`, cardinality(`+at+`::bigint[])) RETURNING 0::bigint AS base)`)
		} else {
			ctes = append(ctes, `seq AS (UPDATE khala_event_seqs SET last_seq = last_seq + cardinality(`+at+`::bigint[])
	WHERE thread = `+thread+` RETURNING last_seq - cardinality(`+at+`::bigint[]) AS base)`)
		}
		if p&partEvents != 0 {
			ctes = append(ctes, `ev AS (INSERT INTO khala_events (thread, seq, at, type, step, role, agent, adapter, message, status, turn, claim, attempt)
	SELECT `+thread+`, b.base + u.ord, u.at, u.type, u.step, u.role, u.agent, u.adapter, u.message, u.status, u.turn, u.claim, u.attempt
	FROM seq b, unnest(`+at+`::bigint[], `+eventArgs(args)+`)
		WITH ORDINALITY AS u(at, type, step, role, agent, adapter, message, status, turn, claim, attempt, ord)
	RETURNING seq)`)
			seqs = "ARRAY(SELECT seq FROM ev ORDER BY seq)"
		}
	}
	ids := "'{}'::bigint[]"
	if p&partWebhooks != 0 {
		ctes = append(ctes, `wh AS (INSERT INTO khala_webhooks (url, payload, attempts, next_at, last_error, created)
	SELECT * FROM unnest(`+args("::text[]", "::bytea[]", "::int[]", "::bigint[]", "::text[]", "::bigint[]")+`) RETURNING id)`)
		ids = "ARRAY(SELECT id FROM wh ORDER BY id)"
	}
	if p&partUsage != 0 {
		ctes = append(ctes, usageCTE(thread, args))
	}
	return "WITH " + strings.Join(ctes, ",\n") + "\nSELECT CASE WHEN " + strings.Join(checks, " AND ") +
		" THEN 1 ELSE khala_stale() END, " + seqs + ", " + ids
}

// placeholders numbers a statement's arguments.
type placeholders int

// arg is the next argument's placeholder.
func (n *placeholders) arg() string {
	*n++
	return "$" + strconv.Itoa(int(*n))
}

// args are the next len(casts) arguments' placeholders, each with its cast.
func (n *placeholders) args(casts ...string) string {
	ph := make([]string, len(casts))
	for k, c := range casts {
		ph[k] = n.arg() + c
	}
	return strings.Join(ph, ", ")
}

// turnsUpsertCTE writes the turns rows selects (turnCols, in order): new
// ones inserted, changed ones only at the revision read.
func turnsUpsertCTE(rows string) string {
	return `tu AS (INSERT INTO khala_turns AS k (` + turnCols + `)
	` + rows + `
	ON CONFLICT (thread, step) DO UPDATE SET workflow = EXCLUDED.workflow, role = EXCLUDED.role, state = EXCLUDED.state,
		rev = EXCLUDED.rev, attempt = EXCLUDED.attempt, max_attempts = EXCLUDED.max_attempts, lease = EXCLUDED.lease,
		idle = EXCLUDED.idle, claim = EXCLUDED.claim, agent = EXCLUDED.agent, first_queued = EXCLUDED.first_queued,
		queued_at = EXCLUDED.queued_at, claimed_at = EXCLUDED.claimed_at, lease_expires = EXCLUDED.lease_expires,
		idle_at = EXCLUDED.idle_at, instruction = EXCLUDED.instruction, prompt = EXCLUDED.prompt, child = EXCLUDED.child,
		priority = EXCLUDED.priority, repo = EXCLUDED.repo, repo_declared = EXCLUDED.repo_declared
	WHERE k.rev = EXCLUDED.rev - 1
	RETURNING 1)`
}

// turnArgs are the placeholders of turnArrays' columns.
func turnArgs(args func(casts ...string) string) string {
	return args("::text[]", "::text[]", "::text[]", "::bigint[]", "::int[]", "::int[]", "::bigint[]", "::bigint[]",
		"::text[]", "::text[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]", "::bigint[]", "::text[]", "::text[]",
		"::text[]", "::int[]", "::text[]", "::bool[]")
}

// eventArgs are the placeholders of eventArrays' columns.
func eventArgs(args func(casts ...string) string) string {
	return args("::text[]", "::int[]", "::text[]", "::text[]", "::text[]", "::text[]", "::text[]", "::text[]", "::text[]", "::int[]")
}

// turnSteps is the step of each turn.
func turnSteps(ts []khaladb.Turn) []int32 {
	steps := make([]int32, len(ts))
	for i := range ts {
		steps[i] = int32(ts[i].Step)
	}
	return steps
}

// turnArrays are the turns' columns after step, in turnCols order, each
// written at the revision after the one read.
func turnArrays(ts []khaladb.Turn) []any {
	k := len(ts)
	tAttempt, tMax, tPrio := make([]int32, k), make([]int32, k), make([]int32, k)
	tRepo, tDeclared := make([]string, k), make([]bool, k)
	tWf, tRole, tState, tClaim, tAgent, tInstr, tPrompt, tChild := make([]string, k), make([]string, k), make([]string, k),
		make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	tRev, tLease, tIdle, tFQ, tQA, tCA, tLE, tIA := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k),
		make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k)
	for i := range ts {
		t := &ts[i]
		tWf[i], tRole[i], tState[i], tRev[i] = t.Workflow, t.Role, t.State, int64(t.Rev+1)
		tAttempt[i], tMax[i], tLease[i], tIdle[i] = int32(t.Attempt), int32(t.MaxAttempts), int64(t.Lease), int64(t.Idle)
		tClaim[i], tAgent[i], tFQ[i], tQA[i], tCA[i] = t.Claim, t.Agent, shared.Nanos(t.FirstQueued), shared.Nanos(t.QueuedAt), shared.Nanos(t.ClaimedAt)
		tLE[i], tIA[i], tInstr[i], tPrompt[i] = shared.Nanos(t.LeaseExpires), shared.Nanos(t.IdleAt), t.Instruction, t.Prompt
		tChild[i], tPrio[i], tRepo[i], tDeclared[i] = t.Child, int32(t.Priority), t.Repo, t.RepoDeclared
		if !t.Open() {
			tPrompt[i] = "" // a closed turn is served to no one again
		}
	}
	return []any{tWf, tRole, tState, tRev, tAttempt, tMax, tLease, tIdle, tClaim, tAgent, tFQ, tQA, tCA, tLE, tIA, tInstr, tPrompt, tChild, tPrio, tRepo, tDeclared}
}

func eventTimes(es []workflow.Event) []int64 {
	at := make([]int64, len(es))
	for i, e := range es {
		at[i] = shared.Nanos(e.At)
	}
	return at
}

// eventArrays are the events' columns after their time.
func eventArrays(es []workflow.Event) []any {
	k := len(es)
	step, attempt := make([]int32, k), make([]int32, k)
	typ, role, agent, adapter, msg, status, turn, claim := make([]string, k), make([]string, k), make([]string, k),
		make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	for i, e := range es {
		step[i], attempt[i] = int32(e.Step), int32(e.Attempt)
		typ[i], role[i], agent[i], adapter[i], msg[i] = e.Type, e.Role, e.Agent, e.Adapter, e.Message
		status[i], turn[i], claim[i] = e.Status, e.Turn, e.Claim
	}
	return []any{typ, step, role, agent, adapter, msg, status, turn, claim, attempt}
}

func webhookArrays(hs []khaladb.Webhook) ([]any, error) {
	k := len(hs)
	urls, payloads, attempts := make([]string, k), make([][]byte, k), make([]int32, k)
	next, lastErr, created := make([]int64, k), make([]string, k), make([]int64, k)
	for i, h := range hs {
		var err error
		if payloads[i], err = json.Marshal(h.Payload); err != nil {
			return nil, err
		}
		urls[i], attempts[i], next[i], lastErr[i], created[i] = h.URL, int32(h.Attempts), shared.Nanos(h.NextAt), h.LastErr, shared.Nanos(h.Created)
	}
	return []any{urls, payloads, attempts, next, lastErr, created}, nil
}

// scanChange reads changeStatement's answer into c: event seqs, webhook ids.
func scanChange(row pgx.Row, c *khaladb.ThreadChange) error {
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
	n, ok := khaladb.ParseThreadID(id)
	return n, ok && n <= math.MaxInt64
}

// pgTurnID is ParseTurnID within the keys' ranges.
func pgTurnID(id string) (uint64, int, bool) {
	_, n, step, ok := khaladb.ParseTurnID(id)
	return n, step, ok && n <= math.MaxInt64 && step <= math.MaxInt32
}
