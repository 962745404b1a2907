package knowledge

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"syscall"
	"time"
)

// Readers keeps repositories' indexes open between queries, for a
// long-lived process (the daemon answering `nerve knowledge query`, `nerve
// mcp`): a query on an open index skips opening it and reading its
// schema, and finds its pages in SQLite's cache (GOROOT's index: p50 7 ms,
// against 18-27 ms for the first query of a process).
//
// An index whose file changed (its inode or its ctime: replaced, or
// written outside the open connection's view) is opened again; one
// unused for readerIdle is closed, and at most maxReaders are open.
// The zero value is ready; Close releases them all.
type Readers struct {
	mu   sync.Mutex
	open map[string]*reader
}

const (
	readerIdle = 10 * time.Minute
	maxReaders = 8
)

type reader struct {
	db      *sql.DB
	file    fileID
	used    time.Time
	queries int  // running on db
	dropped bool // no longer in open: closed when its queries end
}

// drop takes rd out of use; its index closes once no query runs on it.
func (rd *reader) drop() {
	rd.dropped = true
	if rd.queries == 0 {
		rd.db.Close()
	}
}

// fileID tells two files at one path apart, and a file from itself
// changed: an inode number may be reused by the next file, its change
// time not.
type fileID struct {
	dev, ino uint64
	ctime    int64
}

func fileIDOf(path string) (fileID, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(sys.Dev), sys.Ino, sys.Ctim.Nano()}, true
}

// Query is Query on the indexes r keeps open. opts.Once is ignored: the
// process asks again.
func (r *Readers) Query(ctx context.Context, roots []string, opts QueryOptions) ([]Hit, error) {
	return query(ctx, roots, opts, func(root string) (*sql.DB, func(), error) {
		rd, err := r.get(root)
		if err != nil {
			return nil, nil, err
		}
		return rd.db, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if rd.queries--; rd.dropped && rd.queries == 0 {
				rd.db.Close()
			}
		}, nil
	})
}

// get returns root's open index, counting one more query on it.
func (r *Readers) get(root string) (*reader, error) {
	now := time.Now()
	id, _ := fileIDOf(IndexPath(root))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open == nil {
		r.open = map[string]*reader{}
	}
	r.closeIdle(now)
	if rd := r.open[root]; rd != nil {
		if rd.file == id {
			rd.used = now
			rd.queries++
			return rd, nil
		}
		rd.drop() // replaced or gone
		delete(r.open, root)
	}
	db, err := openForRead(root, false)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2) // each connection caches up to 32 MB of pages
	if len(r.open) >= maxReaders {
		r.closeLeastUsed()
	}
	rd := &reader{db: db, file: id, used: now, queries: 1}
	r.open[root] = rd
	return rd, nil
}

func (r *Readers) closeIdle(now time.Time) {
	for root, rd := range r.open {
		if now.Sub(rd.used) > readerIdle {
			rd.drop()
			delete(r.open, root)
		}
	}
}

func (r *Readers) closeLeastUsed() {
	var oldest string
	for root, rd := range r.open {
		if oldest == "" || rd.used.Before(r.open[oldest].used) {
			oldest = root
		}
	}
	if oldest != "" {
		r.open[oldest].drop()
		delete(r.open, oldest)
	}
}

// Close closes every index r holds open, each once its queries end.
func (r *Readers) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for root, rd := range r.open {
		rd.drop()
		delete(r.open, root)
	}
}
