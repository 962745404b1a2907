package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rrfK is reciprocal rank fusion's constant: a hit at rank r in a list
// adds 1/(rrfK+r).
const rrfK = 60

// queryEmbedTimeout bounds the wait for the question's vector: past it the
// answer is ranked by words alone rather than late.
const queryEmbedTimeout = 15 * time.Second

// QueryOptions says what to look for.
type QueryOptions struct {
	Text  string
	Limit int // default 10
	// Embedder, when set, fuses cosine similarity with BM25.
	Embedder *Embedder
	// Warn is told, in one line each, about a degraded answer (no vectors
	// of the model, endpoint down, a repository without an index in a
	// global query).
	Warn func(string)
	// Once says the process makes this one query and exits (the CLI):
	// the index is then read through a memory map (openDB).
	Once bool
}

// Hit is one ranked chunk.
type Hit struct {
	Repo      string  `json:"repo"`
	Path      string  `json:"path"`
	StartLine int     `json:"start_line"`
	EndLine   int     `json:"end_line"`
	Score     float64 `json:"score"`
	Text      string  `json:"text"`
	Symbol    string  `json:"-"`

	id int64
}

// QueryError is a question with nothing to search for: exit 2.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// ExitCode is 2: a usage error.
func (e *QueryError) ExitCode() int { return exitUsage }

// Hint says what a query looks like.
func (e *QueryError) Hint() string {
	return `ask in words or identifiers, e.g. nerve knowledge query "how are leases renewed"`
}

// Query ranks the chunks of the repositories at roots. A repository
// without an index is a NoIndexError when it is the only one, and a
// warning otherwise.
func Query(ctx context.Context, roots []string, opts QueryOptions) ([]Hit, error) {
	return query(ctx, roots, opts, func(root string) (*sql.DB, func(), error) {
		db, err := openForRead(root, opts.Once)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(2)
		return db, func() { db.Close() }, nil
	})
}

// openIndex opens a repository's index for one query; done releases it.
type openIndex func(root string) (db *sql.DB, done func(), err error)

func query(ctx context.Context, roots []string, opts QueryOptions, open openIndex) ([]Hit, error) {
	terms := QueryTerms(opts.Text)
	if len(terms) == 0 {
		return nil, &QueryError{Msg: "the query has no words to search for"}
	}
	if opts.Limit <= 0 {
		opts.Limit = 10
	}
	warn := syncWarn(opts.Warn)
	// The question's vector is asked for while the lexical search runs.
	qvec := func() []float32 { return nil }
	if opts.Embedder != nil {
		qvec = sync.OnceValue(func() []float32 {
			ectx, cancel := context.WithTimeout(ctx, queryEmbedTimeout)
			defer cancel()
			vs, err := opts.Embedder.Embed(ectx, []string{opts.Text})
			if err != nil {
				warn(err.Error() + "; ranking by words only")
				return nil
			}
			return vs[0]
		})
		go qvec()
	}
	var all []Hit
	searched := 0
	for _, root := range roots {
		hits, err := queryRepo(ctx, root, open, terms, qvec, opts, warn)
		var nie *NoIndexError
		if errors.As(err, &nie) && len(roots) > 1 {
			warn(fmt.Sprintf("%s has no knowledge index; skipped", root))
			continue
		}
		if err != nil {
			return nil, err
		}
		searched++
		all = append(all, hits...)
	}
	if searched == 0 && len(roots) != 1 {
		return nil, &NoIndexError{}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Score > all[j].Score })
	if len(all) > opts.Limit {
		all = all[:opts.Limit]
	}
	return all, nil
}

func queryRepo(ctx context.Context, root string, open openIndex, terms []string, qvec func() []float32, opts QueryOptions, warn func(string)) ([]Hit, error) {
	db, done, err := open(root)
	if err != nil {
		return nil, err
	}
	defer done()
	// Deeper than asked: the priors reorder, and fusion needs both lists'
	// tails (a rank past 50 adds less than 1/110 to a fused score).
	depth := max(50, 3*opts.Limit)
	// The cosine ranking runs beside the lexical one, on its own connection.
	type semResult struct {
		list []scored
		err  error
	}
	semCh := make(chan semResult, 1)
	go func() {
		v := qvec()
		if v == nil {
			semCh <- semResult{}
			return
		}
		list, err := semantic(ctx, db, opts.Embedder.Model, v, depth, root, warn)
		semCh <- semResult{list, err}
	}()
	lex, err := lexical(ctx, db, terms, depth)
	sem := <-semCh
	if err == nil {
		err = sem.err
	}
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", IndexPath(root), err)
	}
	scores := map[int64]float64{}
	var order []int64
	if qvec() == nil {
		for _, h := range lex {
			scores[h.id] = h.score
			order = append(order, h.id)
		}
	} else {
		order = fuse(scores, lex, sem.list)
	}
	hits, err := loadHits(ctx, db, root, order, scores)
	if err != nil {
		return nil, err
	}
	rerank(hits, terms)
	if len(hits) > opts.Limit {
		hits = hits[:opts.Limit]
	}
	return hits, loadTexts(ctx, db, root, hits)
}

// syncWarn makes a Warn func safe to call from several goroutines.
func syncWarn(w func(string)) func(string) {
	if w == nil {
		return func(string) {}
	}
	var mu sync.Mutex
	return func(s string) {
		mu.Lock()
		defer mu.Unlock()
		w(s)
	}
}

type scored struct {
	id    int64
	score float64
}

// Term selection bounds the cost of a query, which grows with the number
// of chunks holding any of its terms: a term in more than commonShare of
// all chunks says little (its IDF is small) and is left out when rarer
// ones remain, and terms are taken rarest first until they reach
// scoreBudget chunks between them.
const (
	commonShare = 0.2
	scoreBudget = 12000
)

// selectTerms returns the terms worth matching, rarest first, and drops
// those no chunk has.
func selectTerms(ctx context.Context, db *sql.DB, terms []string) ([]string, error) {
	type tf struct {
		term string
		df   int
	}
	var dfs []tf
	for _, t := range terms {
		var n int
		err := db.QueryRowContext(ctx, `SELECT doc FROM fts_vocab WHERE term = ?`, t).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		dfs = append(dfs, tf{t, n})
	}
	sort.SliceStable(dfs, func(i, j int) bool { return dfs[i].df < dfs[j].df })
	total, err := chunkCount(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []string
	sum := 0
	for i, d := range dfs {
		if i > 0 && (float64(d.df) > commonShare*float64(total) || sum+d.df > scoreBudget) {
			continue
		}
		sum += d.df
		out = append(out, d.term)
	}
	return out, nil
}

func chunkCount(ctx context.Context, db *sql.DB) (int, error) {
	if v, err := getMeta(ctx, db, "chunks"); err == nil && v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n, nil
		}
	}
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM chunks`).Scan(&n)
	return n, err
}

// lexical is the BM25 ranking of chunks holding any of terms; score is
// the negated bm25 (higher is better).
func lexical(ctx context.Context, db *sql.DB, terms []string, limit int) ([]scored, error) {
	terms, err := selectTerms(ctx, db, terms)
	if err != nil || len(terms) == 0 {
		return nil, err
	}
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	q := fmt.Sprintf(`SELECT rowid, bm25(fts, %g, %g, %g) AS r FROM fts WHERE fts MATCH ? ORDER BY r LIMIT ?`,
		weightPath, weightSymbol, weightBody)
	rows, err := db.QueryContext(ctx, q, strings.Join(quoted, " OR "), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []scored
	for rows.Next() {
		var s scored
		if err := rows.Scan(&s.id, &s.score); err != nil {
			return nil, err
		}
		s.score = -s.score
		out = append(out, s)
	}
	return out, rows.Err()
}

// fuse combines ranked lists by reciprocal rank fusion into scores and
// returns the ids best first.
func fuse(scores map[int64]float64, lists ...[]scored) []int64 {
	for _, l := range lists {
		for r, s := range l {
			scores[s.id] += 1.0 / float64(rrfK+r+1)
		}
	}
	ids := make([]int64, 0, len(scores))
	for id := range scores {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if scores[ids[i]] != scores[ids[j]] {
			return scores[ids[i]] > scores[ids[j]]
		}
		return ids[i] < ids[j]
	})
	return ids
}

// loadHits reads where the chunks ids are, in the order of ids; their text
// is read later, for the few that make the cut.
func loadHits(ctx context.Context, db *sql.DB, root string, ids []int64, scores map[int64]float64) ([]Hit, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT id, path, start_line, end_line, symbol FROM chunks WHERE id IN (`+
		placeholders(len(ids))+`)`, int64Args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", IndexPath(root), err)
	}
	defer rows.Close()
	byID := map[int64]Hit{}
	for rows.Next() {
		h := Hit{Repo: root}
		if err := rows.Scan(&h.id, &h.Path, &h.StartLine, &h.EndLine, &h.Symbol); err != nil {
			return nil, err
		}
		h.Score = scores[h.id]
		byID[h.id] = h
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(ids))
	for _, id := range ids {
		if h, ok := byID[id]; ok {
			out = append(out, h)
		}
	}
	return out, nil
}

func loadTexts(ctx context.Context, db *sql.DB, root string, hits []Hit) error {
	if len(hits) == 0 {
		return nil
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.id
	}
	rows, err := db.QueryContext(ctx, `SELECT id, text FROM chunks WHERE id IN (`+placeholders(len(ids))+`)`, int64Args(ids)...)
	if err != nil {
		return fmt.Errorf("query %s: %w", IndexPath(root), err)
	}
	defer rows.Close()
	texts := map[int64]string{}
	for rows.Next() {
		var id int64
		var t string
		if err := rows.Scan(&id, &t); err != nil {
			return err
		}
		texts[id] = t
	}
	for i := range hits {
		hits[i].Text = texts[hits[i].id]
	}
	return rows.Err()
}

func placeholders(n int) string { return "?" + strings.Repeat(",?", n-1) }

func int64Args(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}
