package knowledge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SyncOptions says what to sync and how.
type SyncOptions struct {
	// Root is the repository's root (see FindRoot).
	Root string
	// Embedder, when set, embeds every chunk without a cached vector of its
	// model after the lexical index is written.
	Embedder *Embedder
	// Registry, when set, remembers Root after a sync.
	Registry *Registry
	// Progress, when set, is called now and then (and once at the end).
	Progress func(Progress)
	// Workers read, hash and chunk files in parallel (default GOMAXPROCS).
	Workers int

	// commitEvery bounds how long one transaction stays open.
	commitEvery time.Duration
	// afterCommit is a test hook called after each commit of the index
	// phase with the number of files applied so far.
	afterCommit func(files int)
}

// Progress is how far a sync has come.
type Progress struct {
	Phase    string // "index" or "embed"
	Files    int    // files to (re)index
	Done     int    // of those, done
	Chunks   int    // chunks written
	Embedded int    // texts embedded
	ToEmbed  int    // texts to embed
	Elapsed  time.Duration
}

// SyncResult is what a sync did.
type SyncResult struct {
	Repo          string  `json:"repo"`
	Added         int     `json:"added"`
	Updated       int     `json:"updated"`
	Removed       int     `json:"removed"`
	Unchanged     int     `json:"unchanged"`
	Skipped       int     `json:"skipped"` // binary or over max_file_size
	ChunksWritten int     `json:"chunks_written"`
	ChunksRemoved int     `json:"chunks_removed"`
	Chunks        int     `json:"chunks"`
	Model         string  `json:"model,omitempty"`
	Embedded      int     `json:"embedded"`
	EmbedCached   int     `json:"embed_cached"`
	Seconds       float64 `json:"seconds"`
}

type fileRow struct {
	size, mtime int64
	hash        string
}

// job is a file whose size or mtime changed since the last sync, or new.
type job struct {
	rel, abs    string
	size, mtime int64
	old         *fileRow
}

// fileResult is a job read, hashed and, when its content changed, chunked.
type fileResult struct {
	job
	hash    string
	gone    bool // vanished or unreadable since the walk: drop it
	binary  bool
	same    bool // content unchanged: only size/mtime are new
	chunks  []Chunk
	pathTok string
	symTok  []string
	bodyTok []string
}

// Sync brings the index of opts.Root up to date with the files there.
func Sync(ctx context.Context, opts SyncOptions) (*SyncResult, error) {
	start := time.Now()
	root := opts.Root
	spec, err := LoadSpec(root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, IndexDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	ignore := filepath.Join(dir, ".gitignore")
	if !exists(ignore) {
		_ = os.WriteFile(ignore, []byte("# nerve's rebuildable caches\n*\n"), 0o644)
	}
	unlock, err := lockSync(root, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	db, err := openForWrite(ctx, IndexPath(root))
	if err != nil {
		return nil, err
	}
	defer db.Close()

	res := &SyncResult{Repo: root}
	known, err := loadFiles(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	jobs, seen, err := walk(root, spec, known, res)
	if err != nil {
		return nil, err
	}
	w := &writer{db: db, res: res, opts: &opts, start: start, total: len(jobs)}
	if w.opts.commitEvery == 0 {
		w.opts.commitEvery = 500 * time.Millisecond
	}
	if err := w.run(ctx, processAll(ctx, jobs, opts.Workers)); err != nil {
		return nil, err
	}
	gone := w.gone
	for p := range known {
		if !seen[p] {
			gone = append(gone, p)
		}
	}
	if err := w.remove(ctx, gone); err != nil {
		return nil, err
	}
	if res.ChunksWritten+res.ChunksRemoved >= optimizeAfter {
		// Many segments written: merged into one, a query opens one
		// iterator per term instead of one per segment.
		if _, err := db.ExecContext(ctx, `INSERT INTO fts(fts) VALUES('optimize')`); err != nil {
			return nil, fmt.Errorf("optimize index: %w", err)
		}
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM chunks`).Scan(&res.Chunks); err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	if res.ChunksRemoved > 0 {
		if err := pruneVectors(ctx, db); err != nil {
			return nil, err
		}
	}
	_ = setMeta(ctx, db, "chunks", strconv.Itoa(res.Chunks))
	_ = setMeta(ctx, db, "synced_at", time.Now().UTC().Format(time.RFC3339))
	if opts.Registry != nil {
		if err := opts.Registry.Remember(root, time.Now()); err != nil {
			return nil, err
		}
	}
	if opts.Embedder != nil {
		res.Model = opts.Embedder.Model
		err = embedMissing(ctx, db, opts.Embedder, res, func(p Progress) {
			if opts.Progress != nil {
				p.Elapsed = time.Since(start)
				opts.Progress(p)
			}
		})
	}
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// optimizeAfter is how many chunks a sync writes or removes before it
// merges the full-text index's segments into one (8 % of a cold sync of
// GOROOT/src, 0.7 s; its queries 8 % faster). Smaller syncs leave it to
// FTS5's own incremental merging.
const optimizeAfter = 1000

// lockSync takes the repository's sync lock: two syncs at once would each
// be correct but do the work twice; the second fails fast instead. The OS
// drops the lock of a killed process.
func lockSync(root, dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "sync.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock index: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &BusyError{Repo: root}
		}
		return nil, fmt.Errorf("lock index: %w", err)
	}
	return func() { f.Close() }, nil
}

func loadFiles(ctx context.Context, db queryer) (map[string]*fileRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT path, size, mtime, hash FROM files`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*fileRow{}
	for rows.Next() {
		var p string
		r := &fileRow{}
		if err := rows.Scan(&p, &r.size, &r.mtime, &r.hash); err != nil {
			return nil, err
		}
		out[p] = r
	}
	return out, rows.Err()
}

// walk lists the files the spec selects. A file whose size and mtime match
// the index is unchanged at the cost of a stat; the others become jobs.
func walk(root string, spec *Spec, known map[string]*fileRow, res *SyncResult) ([]job, map[string]bool, error) {
	var jobs []job
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			if abs == root {
				return err
			}
			return nil // unreadable entry: as if absent
		}
		rel, _ := filepath.Rel(root, abs)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if abs != root && spec.PrunesDir(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !spec.Wants(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Size() > spec.MaxFileSize {
			res.Skipped++
			return nil
		}
		seen[rel] = true
		mtime := info.ModTime().UnixNano()
		old := known[rel]
		if old != nil && old.size == info.Size() && old.mtime == mtime {
			res.Unchanged++
			return nil
		}
		jobs = append(jobs, job{rel: rel, abs: abs, size: info.Size(), mtime: mtime, old: old})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return jobs, seen, nil
}

// processAll reads, hashes and chunks jobs on workers; the results come
// in any order and the channel closes when all are done or ctx ends.
func processAll(ctx context.Context, jobs []job, workers int) <-chan fileResult {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	in := make(chan job)
	out := make(chan fileResult, 2*workers)
	go func() {
		defer close(in)
		for _, j := range jobs {
			select {
			case in <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range in {
				select {
				case out <- process(j):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

func process(j job) fileResult {
	r := fileResult{job: j}
	content, err := os.ReadFile(j.abs)
	if err != nil {
		r.gone = true
		return r
	}
	r.hash = hashBytes(content)
	if j.old != nil && j.old.hash == r.hash {
		r.same = true
		return r
	}
	if isBinary(content) {
		r.binary = true
		return r
	}
	r.chunks = ChunkFile(j.rel, content)
	r.pathTok = IndexText(j.rel)
	r.symTok = make([]string, len(r.chunks))
	r.bodyTok = make([]string, len(r.chunks))
	for i, c := range r.chunks {
		r.symTok[i] = IndexText(c.Symbol)
		r.bodyTok[i] = IndexText(c.Text)
	}
	return r
}
