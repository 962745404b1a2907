package khalapg

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Changes made from claims' views (fastpath.go) share statements too
// (batch.go): an answer's change of one thread, written while another
// replica-mate's is under way, goes in the next statement with the others
// that came meanwhile, each still checked against the version and
// revisions its view read. A statement that finds any of them stale, or
// fails, writes nothing; each change is then written alone, as before,
// so a stale view costs only its own change a locked read.
//
// Lock order holds across threads: a shared statement locks its threads'
// rows, then their turns, then their event counters, each in thread order
// (its changes are sorted by thread; TestChangeBatchPlan), and last the
// usage rollup's rows, in key order, so two shared statements, or one and
// a single change, never wait for each other in a cycle.

// batchableParts are the parts a shared statement writes: an answer's.
// A change with more (a new thread, webhooks) is written alone.
const batchableParts = partTurns | partMessages | partEvents | partUsage

// changeBatches shares statements among a replica's concurrent changes
// made from views, by their parts.
type changeBatches struct {
	batcher[*viewChange, error]
	changes, statements atomic.Int64
}

// viewChange is one thread's change made from its claim's view.
type viewChange struct {
	n       uint64
	version uint64 // the thread's, as the view read it
	c       *khaladb.ThreadChange
	st      *changeStmt
}

// ChangeStats counts the changes written from claims' views since the
// store was opened, and the statements run to write them (one that found
// a view stale wrote nothing, and the change was made from a locked read).
type ChangeStats struct{ Changes, Statements int64 }

// ChangeStats says how many changes shared statements.
func (p *Store) ChangeStats() ChangeStats {
	return ChangeStats{Changes: p.changes.changes.Load(), Statements: p.changes.statements.Load()}
}

var _ khaladb.SharedWrites = (*Store)(nil)

// SharedWrites says how many claims and changes shared statements.
func (p *Store) SharedWrites() khaladb.WriteStats {
	cl, ch := p.ClaimStats(), p.ChangeStats()
	return khaladb.WriteStats{Claims: cl.Claims, ClaimStatements: cl.Statements, Changes: ch.Changes, ChangeStatements: ch.Statements}
}

// writeViewChange writes vc, sharing a statement when it can. An error:
// nothing was written (stale, or failed: a locked read says which).
func (p *Store) writeViewChange(ctx context.Context, vc *viewChange) error {
	parts := changePartsOf(vc.c, false)
	if parts&^batchableParts != 0 {
		return p.writeAlone(ctx, vc)
	}
	werr, err := p.changes.do(ctx, strconv.Itoa(int(parts)), vc, p.writeViewChanges)
	if err != nil {
		return err
	}
	return werr
}

// writeAlone writes vc in its own statement.
func (p *Store) writeAlone(ctx context.Context, vc *viewChange) error {
	p.changes.statements.Add(1)
	err := scanChange(p.pool.QueryRow(ctx, vc.st.sql, vc.st.args...), vc.c)
	if err == nil {
		p.changes.changes.Add(1)
	}
	return err
}

// writeViewChanges writes vcs (of the same parts) in one statement, or
// each alone when one is stale or the statement fails; a thread's second
// change is written alone after its first.
func (p *Store) writeViewChanges(ctx context.Context, vcs []*viewChange) ([]error, error) {
	errs := make([]error, len(vcs))
	if len(vcs) == 1 {
		errs[0] = p.writeAlone(ctx, vcs[0])
		return errs, nil
	}
	var together, alone []int
	seen := map[uint64]bool{}
	for i, vc := range vcs {
		if seen[vc.n] {
			alone = append(alone, i)
			continue
		}
		seen[vc.n] = true
		together = append(together, i)
	}
	slices.SortFunc(together, func(a, b int) int { return cmp.Compare(vcs[a].n, vcs[b].n) })
	batch := make([]*viewChange, len(together))
	for k, i := range together {
		batch[k] = vcs[i]
	}
	if err := p.writeShared(ctx, batch); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		alone = append(together, alone...)
	}
	for _, i := range alone {
		errs[i] = p.writeAlone(ctx, vcs[i])
	}
	return errs, nil
}

// writeShared writes vcs, of distinct threads in thread order, in one
// statement: all or none.
func (p *Store) writeShared(ctx context.Context, vcs []*viewChange) error {
	parts := changePartsOf(vcs[0].c, false)
	args := sharedChangeArgs(vcs, parts)
	p.changes.statements.Add(1)
	var (
		written      int // 1, or the statement failed (khala_stale)
		seqThreads   []int64
		seqBases     []int64
		baseOfThread = map[int64]int64{}
	)
	if err := p.pool.QueryRow(ctx, sharedChangeText(parts), args...).Scan(&written, &seqThreads, &seqBases); err != nil {
		return err
	}
	for i, n := range seqThreads {
		baseOfThread[n] = seqBases[i]
	}
	for _, vc := range vcs {
		base, ok := baseOfThread[int64(vc.n)]
		if len(vc.c.Events) > 0 && !ok {
			return fmt.Errorf("thread %s: no event counter written", vc.c.Thread.ID)
		}
		for j := range vc.c.Events {
			vc.c.Events[j].Seq = uint64(base) + uint64(j) + 1
		}
	}
	p.changes.changes.Add(int64(len(vcs)))
	return nil
}

// sharedChangeArgs are the arguments of vcs' shared statement (parts),
// as sharedChangeText numbers them.
func sharedChangeArgs(vcs []*viewChange, parts changeParts) []any {
	k := len(vcs)
	threads, versions := make([]int64, k), make([]int64, k)
	wfs, statuses, pendings := make([]string, k), make([]string, k), make([]string, k)
	records, counts := make([][]byte, k), make([]int32, k)
	var (
		turns                []khaladb.Turn
		turnThreads, mThread []int64
		mSteps               []int32
		mRecords             [][]byte
		events               []workflow.Event
		eThreads             []int64
		eOrds                []int32
	)
	for i, vc := range vcs {
		c := vc.c
		threads[i], versions[i] = int64(vc.n), int64(vc.version+1)
		wfs[i], statuses[i], records[i] = c.Thread.Workflow, c.Thread.Status, vc.st.record
		pendings[i], counts[i] = intArrayLiteral(vc.st.pending), int32(len(c.Events))
		for _, t := range c.Turns {
			turns, turnThreads = append(turns, t), append(turnThreads, int64(vc.n))
		}
		for j, m := range c.Messages {
			mThread, mSteps, mRecords = append(mThread, int64(vc.n)), append(mSteps, int32(m.Step)), append(mRecords, vc.st.messages[j])
		}
		for j, e := range c.Events {
			events, eThreads, eOrds = append(events, e), append(eThreads, int64(vc.n)), append(eOrds, int32(j+1))
		}
	}
	args := []any{threads, wfs, statuses, versions, records, pendings}
	if parts&partTurns != 0 {
		args = append(append(args, turnThreads, turnSteps(turns)), turnArrays(turns)...)
	}
	if parts&partMessages != 0 {
		args = append(args, mThread, mSteps, mRecords)
	}
	if parts&partEvents != 0 {
		args = append(append(args, counts, eThreads, eOrds, eventTimes(events)), eventArrays(events)...)
	}
	if parts&partUsage != 0 {
		var rows []shardedRow
		for _, vc := range vcs {
			rows = append(rows, shardedRows(vc.n, vc.c.Spent)...)
		}
		args = append(args, usageArrays(rows, true)...)
	}
	return args
}

// intArrayLiteral is steps as a PostgreSQL array literal: a shared
// statement's threads' pending steps, one text each (arrays of arrays
// must all be one length).
func intArrayLiteral(steps []int32) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range steps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(s)))
	}
	b.WriteByte('}')
	return b.String()
}

var sharedChangeTexts [allChangeParts]atomic.Pointer[string]

// sharedChangeText is the statement of changes of several threads with
// parts p (of batchableParts), as writeShared numbers its arguments.
func sharedChangeText(p changeParts) string {
	if s := sharedChangeTexts[p].Load(); s != nil {
		return *s
	}
	var ph placeholders
	arg, args := ph.arg, ph.args
	threads := arg()
	ctes := []string{`th AS (UPDATE khala_threads t SET workflow = u.wf, status = u.st, version = u.ver, record = u.rec,
		pending = u.pend::int[]
	FROM unnest(` + threads + `::bigint[], ` + args("::text[]", "::text[]", "::bigint[]", "::bytea[]", "::text[]") + `)
		AS u(n, wf, st, ver, rec, pend)
	WHERE t.n = u.n AND t.version = u.ver - 1 RETURNING 1)`}
	checks := []string{"(SELECT count(*) FROM th) = cardinality(" + threads + "::bigint[])"}
	if p&partTurns != 0 {
		tt, steps := arg(), arg()
		ctes = append(ctes, turnsUpsertCTE(`SELECT u.* FROM unnest(`+tt+`::bigint[], `+steps+`::int[], `+turnArgs(args)+`) AS u`))
		checks = append(checks, "(SELECT count(*) FROM tu) = cardinality("+steps+"::int[])")
	}
	if p&partMessages != 0 {
		mt, steps, recs := arg(), arg(), arg()
		ctes = append(ctes, `ms AS (INSERT INTO khala_messages (thread, step, record)
	SELECT * FROM unnest(`+mt+`::bigint[], `+steps+`::int[], `+recs+`::bytea[])
	ON CONFLICT (thread, step) DO NOTHING RETURNING 1)`)
		checks = append(checks, "(SELECT count(*) FROM ms) = cardinality("+steps+"::int[])")
	}
	bases := "'{}'::bigint[], '{}'::bigint[]"
	if p&partEvents != 0 {
		counts, et, ords := arg(), arg(), arg()
		ctes = append(ctes, `seq AS (UPDATE khala_event_seqs s SET last_seq = s.last_seq + u.k
	FROM unnest(`+threads+`::bigint[], `+counts+`::int[]) AS u(thread, k)
	WHERE s.thread = u.thread AND u.k > 0 RETURNING s.thread, s.last_seq - u.k AS base)`,
			`ev AS (INSERT INTO khala_events (thread, seq, at, type, step, role, agent, adapter, message, status, turn, claim, attempt)
	SELECT u.thread, b.base + u.ord, u.at, u.type, u.step, u.role, u.agent, u.adapter, u.message, u.status, u.turn, u.claim, u.attempt
	FROM unnest(`+et+`::bigint[], `+ords+`::int[], `+args("::bigint[]")+`, `+eventArgs(args)+`)
		AS u(thread, ord, at, type, step, role, agent, adapter, message, status, turn, claim, attempt)
	JOIN seq b ON b.thread = u.thread
	RETURNING 1)`)
		checks = append(checks, "(SELECT count(*) FROM ev) = cardinality("+et+"::bigint[])")
		bases = "ARRAY(SELECT thread FROM seq), ARRAY(SELECT base FROM seq)"
	}
	if p&partUsage != 0 {
		ctes = append(ctes, usageCTE("", args))
	}
	s := "WITH " + strings.Join(ctes, ",\n") + "\nSELECT CASE WHEN " + strings.Join(checks, " AND ") +
		" THEN 1 ELSE khala_stale() END, " + bases
	sharedChangeTexts[p].Store(&s)
	return s
}
