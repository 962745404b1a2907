package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver: pure Go, FTS5 built in
)

// schemaVersion changes when the tables or the tokenizer change; an index
// of another version is dropped and rebuilt, since it is only a cache.
const schemaVersion = 7

// BM25 column weights: a word in the path or the declared names says more
// about a chunk than the same word in its body.
const (
	weightPath   = 4.0
	weightSymbol = 6.0
	weightBody   = 1.0
)

var schema = []string{
	`CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS files(
		path TEXT PRIMARY KEY,
		size INTEGER NOT NULL,
		mtime INTEGER NOT NULL,
		hash TEXT NOT NULL,
		chunks INTEGER NOT NULL
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS chunks(
		id INTEGER PRIMARY KEY,
		path TEXT NOT NULL,
		start_line INTEGER NOT NULL,
		end_line INTEGER NOT NULL,
		hash TEXT NOT NULL,
		symbol TEXT NOT NULL,
		text TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path)`,
	`CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash)`,
	// Contentless: the tokens are only indexed, the text lives in chunks.
	`CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
		path, symbol, body,
		content='', contentless_delete=1,
		tokenize="unicode61 tokenchars '_'"
	)`,
	// Document frequencies of the (already stemmed) terms, for queries.
	`CREATE VIRTUAL TABLE IF NOT EXISTS fts_vocab USING fts5vocab(fts, 'row')`,
	// One vector per model and chunk text: the embedding cache. A rowid
	// table: its rows (kilobytes of floats) are far too big to be keys.
	`CREATE TABLE IF NOT EXISTS vectors(
		id INTEGER PRIMARY KEY,
		model TEXT NOT NULL,
		hash TEXT NOT NULL,
		dim INTEGER NOT NULL,
		vec BLOB NOT NULL,
		bits BLOB NOT NULL,
		UNIQUE(model, hash)
	)`,
	// Sign-bit sketches of each model's vectors (see sketch.go).
	`CREATE TABLE IF NOT EXISTS sketches(
		model TEXT NOT NULL,
		part INTEGER NOT NULL,
		gen INTEGER NOT NULL,
		dim INTEGER NOT NULL,
		ids BLOB NOT NULL,
		bits BLOB NOT NULL,
		PRIMARY KEY(model, part)
	)`,
}

// openDB opens the index at path. Every connection is in WAL mode with a
// busy timeout, so a query reads while a sync writes and neither fails on
// the other's lock. A mapped one reads the file through a memory map (up
// to 1 GiB): for a process that queries once, a mapped page costs no read
// call, no copy and no fresh memory for the copy (a tenth of a query over
// GOROOT); a long-lived process reuses the memory it read into before and
// maps nothing.
func openDB(path string, mapped bool) (*sql.DB, error) {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(OFF)", "cache_size(-32000)"} {
		q.Add("_pragma", p)
	}
	if mapped {
		q.Add("_pragma", "mmap_size(1073741824)")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	return db, nil
}

// openForWrite opens (creating when needed) the index and brings its schema
// to this version, dropping an index of another version. A file that is
// not a database at all is deleted and rebuilt: it is only a cache.
func openForWrite(ctx context.Context, path string) (*sql.DB, error) {
	for attempt := 0; ; attempt++ {
		db, err := openDB(path, false)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		err = migrate(ctx, db)
		if err == nil {
			return db, nil
		}
		db.Close()
		if attempt == 0 && isCorrupt(err) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(path + suffix)
			}
			continue
		}
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
}

func isCorrupt(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "not a database") || strings.Contains(msg, "malformed")
}

func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schema[0]); err != nil {
		return err
	}
	v, err := getMeta(ctx, db, "schema")
	if err != nil {
		return err
	}
	if v != "" && v != strconv.Itoa(schemaVersion) {
		for _, t := range []string{"fts_vocab", "fts", "chunks", "files", "vectors", "sketches"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
				return err
			}
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM meta"); err != nil {
			return err
		}
	}
	for _, s := range schema[1:] {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return setMeta(ctx, db, "schema", strconv.Itoa(schemaVersion))
}

// openForRead opens an existing index (mapped: for a process that
// queries once, see openDB); none there is a NoIndexError.
func openForRead(root string, mapped bool) (*sql.DB, error) {
	path := IndexPath(root)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, &NoIndexError{Repo: root}
	}
	db, err := openDB(path, mapped)
	if err != nil {
		return nil, err
	}
	v, err := getMeta(context.Background(), db, "schema")
	if err != nil || v != strconv.Itoa(schemaVersion) {
		db.Close()
		if err != nil && !isNoTable(err) && !isCorrupt(err) {
			return nil, fmt.Errorf("read index %s: %w", path, err)
		}
		return nil, &NoIndexError{Repo: root}
	}
	return db, nil
}

func isNoTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getMeta(ctx context.Context, db execer, key string) (string, error) {
	var v string
	err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func setMeta(ctx context.Context, db execer, key, value string) error {
	_, err := db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}
