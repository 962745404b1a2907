package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// embedMissing embeds every distinct chunk text that has no vector of e's
// model yet, a batch per request and a transaction per batch, so what was
// embedded before a failure stays cached. It first checks that the model
// still gives the vectors the index holds.
func embedMissing(ctx context.Context, db *sql.DB, e *Embedder, res *SyncResult, progress func(Progress)) error {
	if err := probeModel(ctx, db, e); err != nil {
		return err
	}
	ids, distinct, err := missingVectors(ctx, db, e.Model)
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	res.EmbedCached = distinct - len(ids)
	bs := e.batchSize()
	for i := 0; i < len(ids); i += bs {
		batch := ids[i:min(i+bs, len(ids))]
		hashes, texts, err := chunkTexts(ctx, db, batch)
		if err != nil {
			return fmt.Errorf("read index: %w", err)
		}
		vecs, err := e.Embed(ctx, texts)
		if err != nil {
			return err
		}
		if err := storeVectors(ctx, db, e.Model, hashes, vecs); err != nil {
			return err
		}
		res.Embedded += len(batch)
		progress(Progress{Phase: "embed", Embedded: res.Embedded, ToEmbed: len(ids)})
	}
	if err := buildSketch(ctx, db, e.Model); err != nil {
		return err
	}
	return setMeta(ctx, db, "embed_model", e.Model)
}

// probeModel embeds one text the index has a vector of and compares: when
// the model behind the name changed (another dimension, or other vectors),
// every vector of the name is dropped, to be embedded again rather than
// compared with the new model's. It is also how a sync with nothing to
// embed finds the endpoint down.
func probeModel(ctx context.Context, db *sql.DB, e *Embedder) error {
	var text string
	var stored []byte
	err := db.QueryRowContext(ctx, `SELECT c.text, v.vec FROM vectors v JOIN chunks c ON c.hash = v.hash
		WHERE v.model = ? LIMIT 1`, e.Model).Scan(&text, &stored)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // nothing stored to compare with
	}
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	vecs, err := e.Embed(ctx, []string{text})
	if err != nil {
		return err
	}
	if len(stored) == 4*len(vecs[0]) && dotBytes(vecs[0], stored) >= 0.99 {
		return nil
	}
	return changeVectors(ctx, db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM vectors WHERE model = ?`, e.Model)
		return err
	})
}

// missingVectors returns one chunk id per distinct text lacking a vector of
// model, and how many distinct texts there are. Two scans and a map, not a
// join: SQLite's plan for the join is far slower on big vector rows.
func missingVectors(ctx context.Context, db *sql.DB, model string) ([]int64, int, error) {
	have := map[string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT hash FROM vectors WHERE model = ?`, model)
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return nil, 0, err
		}
		have[h] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	rows, err = db.QueryContext(ctx, `SELECT id, hash FROM chunks ORDER BY id`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	var ids []int64
	for rows.Next() {
		var id int64
		var h string
		if err := rows.Scan(&id, &h); err != nil {
			return nil, 0, err
		}
		if seen[h] {
			continue
		}
		seen[h] = true
		if !have[h] {
			ids = append(ids, id)
		}
	}
	return ids, len(seen), rows.Err()
}

func chunkTexts(ctx context.Context, db *sql.DB, ids []int64) (hashes, texts []string, err error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	q := `SELECT hash, text FROM chunks WHERE id IN (?` + strings.Repeat(",?", len(ids)-1) + `)`
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var h, t string
		if err := rows.Scan(&h, &t); err != nil {
			return nil, nil, err
		}
		hashes, texts = append(hashes, h), append(texts, t)
	}
	return hashes, texts, rows.Err()
}

func storeVectors(ctx context.Context, db *sql.DB, model string, hashes []string, vecs [][]float32) error {
	return changeVectors(ctx, db, func(tx *sql.Tx) error {
		for i, v := range vecs {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO vectors(model, hash, dim, vec, bits) VALUES(?, ?, ?, ?, ?)`,
				model, hashes[i], len(v), encodeVec(v), signBits(v)); err != nil {
				return err
			}
		}
		return nil
	})
}

// changeVectors runs change in one transaction that also marks the change
// (bumpGen), as every change of vectors must.
func changeVectors(ctx context.Context, db *sql.DB, change func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		defer tx.Rollback()
		if err = change(tx); err == nil {
			if err = bumpGen(ctx, tx); err == nil {
				err = tx.Commit()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// pruneVectors drops cached vectors no chunk has any more.
func pruneVectors(ctx context.Context, db *sql.DB) error {
	r, err := db.ExecContext(ctx, `DELETE FROM vectors WHERE hash NOT IN (SELECT hash FROM chunks)`)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if n, _ := r.RowsAffected(); n > 0 {
		return bumpGen(ctx, db)
	}
	return nil
}
