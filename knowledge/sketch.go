package knowledge

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// A sketch is every chunk's sign-bit vector of one model packed into a few
// blobs, so a query reads a few megabytes in a handful of rows instead of
// joining every chunk to its vector. It only proposes candidates; their
// exact cosine is then computed from the vectors table, so a stale sketch
// costs recall, never correctness, and a sketch whose generation is not
// the index's is not used at all.

// sketchPart is how many chunks one sketch row holds.
const sketchPart = 8192

// bumpGen marks a change of chunks or vectors, inside the transaction that
// makes it.
func bumpGen(ctx context.Context, tx execer) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES('gen', '1')
		ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1`)
	return err
}

func currentGen(ctx context.Context, db execer) (int64, error) {
	v, err := getMeta(ctx, db, "gen")
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// buildSketch rewrites model's sketch from the vectors of the current
// chunks; it does nothing when the sketch is already of this generation.
func buildSketch(ctx context.Context, db *sql.DB, model string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	defer tx.Rollback()
	gen, err := currentGen(ctx, tx)
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	var have int64 = -1
	_ = tx.QueryRowContext(ctx, `SELECT min(gen) FROM sketches WHERE model = ?`, model).Scan(&have)
	if have == gen {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sketches WHERE model = ?`, model); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	bitsOf, dim, err := modelBits(ctx, tx, model)
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, hash FROM chunks ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	type part struct {
		ids, bits []byte
		n         int
	}
	var parts []part
	for rows.Next() {
		var id int64
		var h string
		if err := rows.Scan(&id, &h); err != nil {
			rows.Close()
			return fmt.Errorf("read index: %w", err)
		}
		v, ok := bitsOf[h]
		if !ok {
			continue
		}
		if len(parts) == 0 || parts[len(parts)-1].n == sketchPart {
			parts = append(parts, part{})
		}
		p := &parts[len(parts)-1]
		p.ids = binary.LittleEndian.AppendUint64(p.ids, uint64(id))
		p.ids = binary.LittleEndian.AppendUint64(p.ids, uint64(v.id))
		p.bits = append(p.bits, v.bits...)
		p.n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	for i, p := range parts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sketches(model, part, gen, dim, ids, bits) VALUES(?, ?, ?, ?, ?, ?)`,
			model, i, gen, dim, p.ids, p.bits); err != nil {
			return fmt.Errorf("write index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

type vecBits struct {
	id   int64
	bits []byte
}

// modelBits maps each text hash to its sign bits among model's vectors of
// the most common dimension.
func modelBits(ctx context.Context, tx *sql.Tx, model string) (map[string]vecBits, int, error) {
	var dim int
	err := tx.QueryRowContext(ctx, `SELECT dim FROM vectors WHERE model = ? GROUP BY dim ORDER BY count(*) DESC LIMIT 1`, model).Scan(&dim)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, hash, bits FROM vectors WHERE model = ? AND dim = ?`, model, dim)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := map[string]vecBits{}
	for rows.Next() {
		var v vecBits
		var h string
		if err := rows.Scan(&v.id, &h, &v.bits); err != nil {
			return nil, 0, err
		}
		out[h] = v
	}
	return out, dim, rows.Err()
}

// candidate is a chunk the sketch proposes, with its vector's row.
type candidate struct{ chunk, vec int64 }

// sketchCandidates returns the n chunks whose sign bits are nearest qvec's,
// or ok false when model has no sketch of the index's current generation
// and dimension.
func sketchCandidates(ctx context.Context, db *sql.DB, model string, qvec []float32, n int) (cands []candidate, ok bool, err error) {
	gen, err := currentGen(ctx, db)
	if err != nil {
		return nil, false, err
	}
	rows, err := db.QueryContext(ctx, `SELECT gen, dim, ids, bits FROM sketches WHERE model = ? ORDER BY part`, model)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	qb := signBits(qvec)
	w := len(qb)
	top := newTopK(n)
	parts := 0
	vecOf := map[int64]int64{}
	for rows.Next() {
		var g int64
		var dim int
		var idb, bits sql.RawBytes // read in place: megabytes per query
		if err := rows.Scan(&g, &dim, &idb, &bits); err != nil {
			return nil, false, err
		}
		if g != gen || dim != len(qvec) {
			return nil, false, nil
		}
		parts++
		for i := 0; (i+1)*16 <= len(idb) && (i+1)*w <= len(bits); i++ {
			d := hamming(qb, bits[i*w:(i+1)*w])
			if len(top.items) == top.k && -float64(d) <= top.items[0].score {
				continue
			}
			id := int64(binary.LittleEndian.Uint64(idb[i*16:]))
			vecOf[id] = int64(binary.LittleEndian.Uint64(idb[i*16+8:]))
			top.push(id, -float64(d))
		}
	}
	if err := rows.Err(); err != nil || parts == 0 {
		return nil, false, err
	}
	for _, s := range top.items {
		cands = append(cands, candidate{chunk: s.id, vec: vecOf[s.id]})
	}
	return cands, true, nil
}

// topK keeps the k best scores seen (a min-heap on score).
type topK struct {
	k     int
	items []scored
}

func newTopK(k int) *topK { return &topK{k: k} }

func (t *topK) push(id int64, score float64) {
	if len(t.items) < t.k {
		t.items = append(t.items, scored{id, score})
		for i := len(t.items) - 1; i > 0; {
			p := (i - 1) / 2
			if t.items[p].score <= t.items[i].score {
				break
			}
			t.items[p], t.items[i] = t.items[i], t.items[p]
			i = p
		}
		return
	}
	if score <= t.items[0].score {
		return
	}
	t.items[0] = scored{id, score}
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.items) && t.items[l].score < t.items[m].score {
			m = l
		}
		if r < len(t.items) && t.items[r].score < t.items[m].score {
			m = r
		}
		if m == i {
			break
		}
		t.items[m], t.items[i] = t.items[i], t.items[m]
		i = m
	}
}
