package khalapg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/workflow"
)

// Reading a thread's view: the thread, its messages and its open turns,
// from one snapshot in one round trip. Messages never change, so each
// replica caches them per thread (shared.Messages) and the database sends only
// the bodies it has not seen.

// Thread implements Storage.
func (p *Store) Thread(ctx context.Context, id string) (*khaladb.ThreadView, error) {
	n, ok := pgThreadID(id)
	if !ok {
		return nil, khaladb.ErrNotFound
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	cached := p.queueView(b, n, "")
	b.Queue("COMMIT")
	br := p.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var v *pgView
	if err == nil {
		v, err = p.readView(br, n, cached)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = p.fillMessages(ctx, p.pool, n, v) // messages never change: any snapshot will do
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, p.fail("read thread "+id, err)
	}
	return &v.ThreadView, p.fail("", nil)
}

// queueView queues the three reads of thread n's view (lock: a locking
// clause for the thread row and its open turns, taken in step order) and
// returns the cached messages it relies on. Messages never change, so
// those up to the last one cached come back without a body; open turns are
// found through the thread's pending steps, not by scanning its history.
func (p *Store) queueView(b *pgx.Batch, n uint64, lock string) []workflow.Message {
	cached := p.cachedMessages(n)
	last := int32(0)
	if len(cached) > 0 {
		last = int32(cached[len(cached)-1].Step)
	}
	b.Queue("SELECT version, record FROM khala_threads WHERE n = $1 "+lock, int64(n))
	b.Queue(`SELECT step, CASE WHEN step > $2 THEN record END FROM khala_messages WHERE thread = $1 ORDER BY step`, int64(n), last)
	b.Queue("SELECT "+turnCols+` FROM khala_turns WHERE thread = $1
		AND step = ANY (SELECT unnest(pending) FROM khala_threads WHERE n = $1)
		AND state IN ('queued', 'claimed', 'waiting', 'child') ORDER BY step `+lock, int64(n))
	return cached
}

// readView reads the results queueView queued. A message without a body
// that the cache lacks (a parallel turn answered after later ones were
// cached) is left for fillMessages: its step is in v.missing.
func (p *Store) readView(br pgx.BatchResults, n uint64, cached []workflow.Message) (*pgView, error) {
	v := &pgView{}
	var (
		version int64
		rec     []byte
	)
	if err := br.QueryRow().Scan(&version, &rec); errors.Is(err, pgx.ErrNoRows) {
		return nil, khaladb.ErrNotFound
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(rec, &v.Thread); err != nil {
		return nil, fmt.Errorf("thread record: %w", err)
	}
	v.Thread.Version = uint64(version)
	rows, _ := br.Query()
	i := 0
	for rows.Next() {
		var step int32
		var body []byte
		if err := rows.Scan(&step, &body); err != nil {
			return nil, err
		}
		if err := v.addMessage(n, step, body, cached, &i); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, _ = br.Query()
	turns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (khaladb.Turn, error) { return scanTurn(r) })
	v.Turns = turns
	return v, err
}

// addMessage appends thread n's message step to the view: body when the
// read brought one, else the cached copy (cached[*i:] is searched, in step
// order), else a placeholder that fillMessages fills.
func (v *pgView) addMessage(n uint64, step int32, body []byte, cached []workflow.Message, i *int) error {
	for *i < len(cached) && cached[*i].Step < int(step) {
		*i++
	}
	var m workflow.Message
	switch {
	case body != nil:
		if err := json.Unmarshal(body, &m); err != nil {
			return fmt.Errorf("message %s: %w", khaladb.TurnID(khaladb.ThreadID(n), int(step)), err)
		}
	case *i < len(cached) && cached[*i].Step == int(step):
		m = cached[*i]
	default:
		m.Step = int(step)
		v.missing = append(v.missing, step)
	}
	v.Messages = append(v.Messages, m)
	return nil
}

// cachedMessages are the messages of thread n this replica has read.
func (p *Store) cachedMessages(n uint64) []workflow.Message {
	return p.msgs.Get(n)
}

// pgView is a view being read: the messages whose bodies are still to be
// read are missing.
type pgView struct {
	khaladb.ThreadView
	missing []int32
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// fillMessages reads the bodies readView left out, then caches the view's
// messages for the next read.
func (p *Store) fillMessages(ctx context.Context, q querier, n uint64, v *pgView) error {
	if len(v.missing) > 0 {
		rows, err := q.Query(ctx, "SELECT step, record FROM khala_messages WHERE thread = $1 AND step = ANY($2::int[])", int64(n), v.missing)
		if err != nil {
			return err
		}
		bodies, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (workflow.Message, error) {
			var step int32
			var body []byte
			var m workflow.Message
			if err := r.Scan(&step, &body); err != nil {
				return m, err
			}
			return m, json.Unmarshal(body, &m)
		})
		if err != nil {
			return err
		}
		for _, b := range bodies {
			if i := slices.IndexFunc(v.Messages, func(m workflow.Message) bool { return m.Step == b.Step }); i >= 0 {
				v.Messages[i] = b
			}
		}
	}
	v.Messages = slices.Clip(v.Messages) // a caller's append must not write into the cache
	p.cacheMessages(n, v.Messages)
	return nil
}

// cacheMessages keeps msgs, all of thread n's messages in step order, for
// the thread's next read.
func (p *Store) cacheMessages(n uint64, msgs []workflow.Message) {
	if len(msgs) == 0 {
		return
	}
	p.msgs.Put(n, msgs)
}
