package knowledge

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
)

// rescoreFactor times the wanted depth is how many sketch candidates get
// an exact cosine.
const rescoreFactor = 8

// semantic ranks chunks by cosine similarity to qvec among the vectors of
// model (never another model's, nor another dimension's). With a current
// sketch it scores exactly only the candidates the sketch proposes; without
// one it scans every vector.
func semantic(ctx context.Context, db *sql.DB, model string, qvec []float32, limit int, root string, warn func(string)) ([]scored, error) {
	cands, ok, err := sketchCandidates(ctx, db, model, qvec, max(200, rescoreFactor*limit))
	if err != nil {
		return nil, err
	}
	top := newTopK(limit)
	n := 0
	if ok {
		n, err = rescore(ctx, db, cands, qvec, top)
	} else {
		n, err = scanAll(ctx, db, model, qvec, top)
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		warn(fmt.Sprintf("%s has no vectors of model %s; ranking by words only (run `nerve knowledge sync`)", root, model))
		return nil, nil
	}
	out := top.items
	sort.Slice(out, func(i, j int) bool { return out[i].score > out[j].score })
	return out, nil
}

// rescore computes the exact cosine of the sketch's candidates.
func rescore(ctx context.Context, db *sql.DB, cands []candidate, qvec []float32, top *topK) (int, error) {
	if len(cands) == 0 {
		return 0, nil
	}
	chunksOf := map[int64][]int64{}
	var vecIDs []int64
	for _, c := range cands {
		if _, ok := chunksOf[c.vec]; !ok {
			vecIDs = append(vecIDs, c.vec)
		}
		chunksOf[c.vec] = append(chunksOf[c.vec], c.chunk)
	}
	rows, err := db.QueryContext(ctx, `SELECT id, vec FROM vectors WHERE id IN (`+placeholders(len(vecIDs))+`)`, int64Args(vecIDs)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var b sql.RawBytes
		if err := rows.Scan(&id, &b); err != nil {
			return 0, err
		}
		if len(b) != 4*len(qvec) {
			continue
		}
		score := float64(dotBytes(qvec, b))
		for _, c := range chunksOf[id] {
			top.push(c, score)
			n++
		}
	}
	return n, rows.Err()
}

// scanAll computes the cosine of every chunk's vector: the way without a
// current sketch. Two scans and a map, not a join: SQLite's plan for the
// join is far slower on big vector rows.
func scanAll(ctx context.Context, db *sql.DB, model string, qvec []float32, top *topK) (int, error) {
	byHash, err := chunksByHash(ctx, db, `SELECT id, hash FROM chunks`, nil)
	if err != nil {
		return 0, err
	}
	rows, err := db.QueryContext(ctx, `SELECT hash, vec FROM vectors WHERE model = ? AND dim = ?`, model, len(qvec))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var h string
		var b sql.RawBytes
		if err := rows.Scan(&h, &b); err != nil {
			return 0, err
		}
		score := float64(dotBytes(qvec, b))
		for _, id := range byHash[h] {
			top.push(id, score)
			n++
		}
	}
	return n, rows.Err()
}

func chunksByHash(ctx context.Context, db *sql.DB, q string, args []any) (map[string][]int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]int64{}
	for rows.Next() {
		var id int64
		var h string
		if err := rows.Scan(&id, &h); err != nil {
			return nil, err
		}
		out[h] = append(out[h], id)
	}
	return out, rows.Err()
}
