package knowledge

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// writer applies file results to the index, one transaction per batch; a
// file's rows (its chunks, their tokens and its files row) always change
// together, so a crash leaves every file either as before or as after.
type writer struct {
	db    *sql.DB
	res   *SyncResult
	opts  *SyncOptions
	start time.Time
	total int

	tx       *sql.Tx
	txStart  time.Time
	gone     []string // vanished between walk and read: removed after
	done     int
	lastProg time.Time
}

type oldChunk struct {
	id         int64
	start, end int
	symbol     string
}

func (w *writer) begin(ctx context.Context) error {
	if w.tx != nil {
		return nil
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	w.tx, w.txStart = tx, time.Now()
	return nil
}

func (w *writer) commit() error {
	if w.tx == nil {
		return nil
	}
	if err := bumpGen(context.Background(), w.tx); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	err := w.tx.Commit()
	w.tx = nil
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if w.opts.afterCommit != nil {
		w.opts.afterCommit(w.done)
	}
	return nil
}

// run applies results until the channel closes. On cancellation the files
// applied so far are committed, then ctx's error is returned.
func (w *writer) run(ctx context.Context, results <-chan fileResult) error {
	defer func() {
		if w.tx != nil {
			_ = w.tx.Rollback()
		}
	}()
	for r := range results {
		if err := w.begin(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		if err := w.apply(ctx, r); err != nil {
			return err
		}
		w.done++
		if time.Since(w.txStart) >= w.opts.commitEvery {
			if err := w.commit(); err != nil {
				return err
			}
		}
		w.progress(false)
	}
	if err := w.commit(); err != nil {
		return err
	}
	w.progress(true)
	return ctx.Err()
}

func (w *writer) progress(final bool) {
	if w.opts.Progress == nil || !final && time.Since(w.lastProg) < 100*time.Millisecond {
		return
	}
	w.lastProg = time.Now()
	w.opts.Progress(Progress{Phase: "index", Files: w.total, Done: w.done, Chunks: w.res.ChunksWritten, Elapsed: time.Since(w.start)})
}

// apply writes one file: chunks whose text is unchanged keep their rows
// (only their line range moves), the others are deleted and inserted.
func (w *writer) apply(ctx context.Context, r fileResult) error {
	ctx = context.WithoutCancel(ctx) // a started file is finished
	tx := w.tx
	switch {
	case r.gone:
		if r.old != nil {
			w.gone = append(w.gone, r.rel)
		}
		return nil
	case r.same:
		w.res.Unchanged++
		return w.putFile(ctx, r, -1)
	}
	old := map[string][]oldChunk{}
	if r.old != nil {
		rows, err := tx.QueryContext(ctx, `SELECT id, hash, start_line, end_line, symbol FROM chunks WHERE path = ?`, r.rel)
		if err != nil {
			return fmt.Errorf("write index: %w", err)
		}
		for rows.Next() {
			var c oldChunk
			var h string
			if err := rows.Scan(&c.id, &h, &c.start, &c.end, &c.symbol); err != nil {
				rows.Close()
				return fmt.Errorf("write index: %w", err)
			}
			old[h] = append(old[h], c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("write index: %w", err)
		}
	}
	for i, c := range r.chunks {
		if list := old[c.Hash]; len(list) > 0 {
			o := list[0]
			old[c.Hash] = list[1:]
			if o.symbol != c.Symbol {
				if err := w.deleteChunk(ctx, o.id); err != nil {
					return err
				}
			} else {
				if o.start != c.StartLine || o.end != c.EndLine {
					if _, err := tx.ExecContext(ctx, `UPDATE chunks SET start_line = ?, end_line = ? WHERE id = ?`, c.StartLine, c.EndLine, o.id); err != nil {
						return fmt.Errorf("write index: %w", err)
					}
				}
				continue
			}
		}
		if err := w.insertChunk(ctx, r, i); err != nil {
			return err
		}
	}
	for _, list := range old {
		for _, o := range list {
			if err := w.deleteChunk(ctx, o.id); err != nil {
				return err
			}
		}
	}
	switch {
	case r.binary:
		w.res.Skipped++
	case r.old == nil:
		w.res.Added++
	default:
		w.res.Updated++
	}
	return w.putFile(ctx, r, len(r.chunks))
}

func (w *writer) insertChunk(ctx context.Context, r fileResult, i int) error {
	c := r.chunks[i]
	res, err := w.tx.ExecContext(ctx, `INSERT INTO chunks(path, start_line, end_line, hash, symbol, text) VALUES(?, ?, ?, ?, ?, ?)`,
		r.rel, c.StartLine, c.EndLine, c.Hash, c.Symbol, c.Text)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if _, err := w.tx.ExecContext(ctx, `INSERT INTO fts(rowid, path, symbol, body) VALUES(?, ?, ?, ?)`,
		id, r.pathTok, r.symTok[i], r.bodyTok[i]); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	w.res.ChunksWritten++
	return nil
}

func (w *writer) deleteChunk(ctx context.Context, id int64) error {
	if _, err := w.tx.ExecContext(ctx, `DELETE FROM fts WHERE rowid = ?`, id); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if _, err := w.tx.ExecContext(ctx, `DELETE FROM chunks WHERE id = ?`, id); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	w.res.ChunksRemoved++
	return nil
}

// putFile records the file's size, mtime and hash; chunks < 0 keeps the
// recorded count.
func (w *writer) putFile(ctx context.Context, r fileResult, chunks int) error {
	_, err := w.tx.ExecContext(ctx, `INSERT INTO files(path, size, mtime, hash, chunks) VALUES(?, ?, ?, ?, max(?, 0))
		ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, hash = excluded.hash,
		chunks = CASE WHEN ? < 0 THEN files.chunks ELSE excluded.chunks END`,
		r.rel, r.size, r.mtime, r.hash, chunks, chunks)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// remove drops deleted, newly excluded and vanished files with their
// chunks, in one transaction.
func (w *writer) remove(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if err := w.begin(ctx); err != nil {
		return err
	}
	defer func() {
		if w.tx != nil {
			_ = w.tx.Rollback()
			w.tx = nil
		}
	}()
	for _, p := range paths {
		rows, err := w.tx.QueryContext(ctx, `SELECT id FROM chunks WHERE path = ?`, p)
		if err != nil {
			return fmt.Errorf("write index: %w", err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("write index: %w", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			if err := w.deleteChunk(ctx, id); err != nil {
				return err
			}
		}
		if _, err := w.tx.ExecContext(ctx, `DELETE FROM files WHERE path = ?`, p); err != nil {
			return fmt.Errorf("write index: %w", err)
		}
		w.res.Removed++
	}
	return w.commit()
}
