package knowledge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func goFile(funcs ...string) string {
	var b strings.Builder
	b.WriteString("package demo\n")
	for _, f := range funcs {
		b.WriteString("\n// " + f + " does its part of the demo.\nfunc " + f + "() {\n" + body(12) + "}\n")
	}
	return b.String()
}

func TestKnowledgeSyncIncremental(t *testing.T) {
	root := newRepo(t, map[string]string{
		"a.go":          goFile("Alpha", "Beta", "Gamma"),
		"b.go":          goFile("Delta"),
		"docs/guide.md": "# Guide\n\nHow the signal bus works.\n",
		"logo.png":      "\x89PNG\x00\x00",
		"data.txt":      "zero\x00byte text is binary\n",
		"huge.txt":      strings.Repeat("big line of text\n", 80000),
		".git/config":   "[core]\n",
	})
	home := t.TempDir()
	reg := &Registry{Home: home}
	r := mustSync(t, SyncOptions{Root: root, Registry: reg})
	if r.Added != 3 || r.Skipped != 2 || r.Updated != 0 || r.Removed != 0 || r.Unchanged != 0 {
		t.Fatalf("cold sync: %+v", r)
	}
	if r.Chunks != r.ChunksWritten || r.Chunks < 5 {
		t.Errorf("cold sync chunks: %+v", r)
	}
	if repos, _ := reg.List(); len(repos) != 1 || repos[0].Path != root {
		t.Errorf("registry: %+v", repos)
	}
	if _, err := os.Stat(filepath.Join(root, ".nerve", ".gitignore")); err != nil {
		t.Errorf("no .nerve/.gitignore: %v", err)
	}

	// Nothing changed: every file costs a stat.
	r = mustSync(t, SyncOptions{Root: root})
	if r.Unchanged != 4 || r.Added+r.Updated+r.Removed+r.ChunksWritten != 0 {
		t.Errorf("warm sync: %+v", r)
	}

	// Touched, not changed: re-read, hashed, nothing rewritten.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "a.go"), later, later); err != nil {
		t.Fatal(err)
	}
	r = mustSync(t, SyncOptions{Root: root})
	if r.Unchanged != 4 || r.Updated != 0 || r.ChunksWritten != 0 {
		t.Errorf("after touch: %+v", r)
	}

	// One function edited: only its chunk is rewritten.
	src := strings.Replace(goFile("Alpha", "Beta", "Gamma"), "// Beta does", "// Beta now does", 1)
	writeTree(t, root, map[string]string{"a.go": src})
	r = mustSync(t, SyncOptions{Root: root})
	if r.Updated != 1 || r.ChunksWritten != 1 || r.ChunksRemoved != 1 || r.Unchanged != 3 {
		t.Errorf("after edit: %+v", r)
	}
	// An insertion above moves the other chunks' lines without rewriting them.
	writeTree(t, root, map[string]string{"a.go": "// Package demo.\n" + src})
	r = mustSync(t, SyncOptions{Root: root})
	if r.Updated != 1 || r.ChunksWritten > 1 {
		t.Errorf("after insert: %+v", r)
	}
	hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "Gamma"})
	if err != nil || len(hits) == 0 {
		t.Fatalf("query Gamma: %v %v", hits, err)
	}
	lines := strings.Split("// Package demo.\n"+src, "\n")
	if got := lines[hits[0].StartLine-1]; got != "// Gamma does its part of the demo." {
		t.Errorf("Gamma's line range not moved: starts at %q", got)
	}

	// Deleted and renamed.
	os.Remove(filepath.Join(root, "b.go"))
	os.Rename(filepath.Join(root, "docs", "guide.md"), filepath.Join(root, "docs", "manual.md"))
	r = mustSync(t, SyncOptions{Root: root})
	if r.Removed != 2 || r.Added != 1 {
		t.Errorf("after delete and rename: %+v", r)
	}
	if hits, _ := Query(context.Background(), []string{root}, QueryOptions{Text: "Delta"}); len(hits) != 0 {
		t.Errorf("deleted file still found: %v", paths(hits))
	}
	if hits, _ := Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus"}); len(hits) != 1 || hits[0].Path != "docs/manual.md" {
		t.Errorf("renamed file: %v", paths(hits))
	}

	// Newly excluded: removed; included again: back.
	writeTree(t, root, map[string]string{SpecFile: "exclude: [\"docs/\"]\n"})
	r = mustSync(t, SyncOptions{Root: root})
	if r.Removed != 1 {
		t.Errorf("after exclude: %+v", r)
	}
	if hits, _ := Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus"}); len(hits) != 0 {
		t.Errorf("excluded file still found: %v", paths(hits))
	}
	writeTree(t, root, map[string]string{SpecFile: "include: [\"**/*.md\"]\n"})
	r = mustSync(t, SyncOptions{Root: root})
	// manual.md is back; a.go, data.txt and knowledge.yaml itself (a
	// default include) are out.
	if r.Added != 1 || r.Removed != 3 {
		t.Errorf("after include change: %+v", r)
	}
}

func TestKnowledgeSyncBadSpec(t *testing.T) {
	root := newRepo(t, map[string]string{SpecFile: "include:\n  - \"a/[\"\n", "a.go": goFile("A")})
	_, err := Sync(context.Background(), SyncOptions{Root: root})
	var se *SpecError
	if !errors.As(err, &se) || se.Line != 2 || se.Field != "include[0]" || se.File != filepath.Join(root, SpecFile) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(IndexPath(root)); err == nil {
		t.Errorf("a bad spec still created an index")
	}
}

func TestKnowledgeSyncBusy(t *testing.T) {
	root := newRepo(t, map[string]string{"a.go": goFile("A")})
	os.MkdirAll(filepath.Join(root, IndexDir), 0o755)
	unlock, err := lockSync(root, filepath.Join(root, IndexDir))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = Sync(context.Background(), SyncOptions{Root: root})
	var be *BusyError
	if !errors.As(err, &be) || be.ExitCode() != 1 {
		t.Fatalf("err = %v, want BusyError", err)
	}
}

// A query runs while a sync writes (WAL): it sees the last commit and
// never fails on the writer's lock.
func TestKnowledgeQueryDuringSync(t *testing.T) {
	root := newRepo(t, map[string]string{"first.go": goFile("SignalBus")})
	mustSync(t, SyncOptions{Root: root})
	files := map[string]string{}
	for i := range 300 {
		files[filepath.Join("gen", "f"+strconv.Itoa(i)+".go")] = goFile("Func"+strconv.Itoa(i), "Other"+strconv.Itoa(i))
	}
	writeTree(t, root, files)

	var wg sync.WaitGroup
	commits := make(chan int, 1000)
	wg.Add(1)
	var syncErr error
	go func() {
		defer wg.Done()
		_, syncErr = Sync(context.Background(), SyncOptions{Root: root, commitEvery: time.Nanosecond,
			afterCommit: func(n int) { commits <- n }})
		close(commits)
	}()
	queries := 0
	for range commits {
		if queries == 5 {
			continue // enough: drain the rest
		}
		hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "signal bus", Limit: 3})
		if err != nil {
			t.Fatalf("query during sync: %v", err)
		}
		if len(hits) == 0 || hits[0].Path != "first.go" {
			t.Fatalf("query during sync: %v", paths(hits))
		}
		queries++
	}
	wg.Wait()
	if syncErr != nil {
		t.Fatal(syncErr)
	}
	if queries < 2 {
		t.Errorf("only %d queries ran during the sync", queries)
	}
}

// The index is a cache: garbage in its place is replaced, not reported.
func TestKnowledgeSyncReplacesCorruptIndex(t *testing.T) {
	root := newRepo(t, map[string]string{"a.go": goFile("Alpha")})
	os.MkdirAll(filepath.Join(root, IndexDir), 0o755)
	if err := os.WriteFile(IndexPath(root), []byte(strings.Repeat("garbage ", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mustSync(t, SyncOptions{Root: root}); r.Added != 1 {
		t.Errorf("sync over garbage: %+v", r)
	}
}

// A sync that writes many chunks leaves the full-text index merged into
// one segment (optimizing it again changes nothing), and queries find the
// same before and after merging, mapped (Once) or not.
func TestKnowledgeSyncMergesABigIndex(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, ".git"), 0o755)
	genTree(t, root, 800)
	if res := mustSync(t, SyncOptions{Root: root}); res.ChunksWritten < optimizeAfter {
		t.Fatalf("a big sync wrote %d chunks, want %d or more", res.ChunksWritten, optimizeAfter)
	}
	db, err := openDB(IndexPath(root), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	shape := func() string {
		var n, size int64
		if err := db.QueryRowContext(ctx, `SELECT count(*), sum(length(block)) FROM fts_data`).Scan(&n, &size); err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(n, 10) + " blocks, " + strconv.FormatInt(size, 10) + " bytes"
	}
	before := shape()
	hits, err := Query(ctx, []string{root}, QueryOptions{Text: word(3)})
	if err != nil || len(hits) == 0 {
		t.Fatalf("query: %v %v", hits, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO fts(fts) VALUES('optimize')`); err != nil {
		t.Fatal(err)
	}
	if after := shape(); after != before {
		t.Fatalf("the index was not merged by the sync: %s, merged %s", before, after)
	}
	for _, once := range []bool{false, true} {
		again, err := Query(ctx, []string{root}, QueryOptions{Text: word(3), Once: once})
		if err != nil || len(again) != len(hits) || again[0] != hits[0] {
			t.Fatalf("merging (or a mapped read: %v) changed what a query finds: %+v, then %+v (%v)", once, hits, again, err)
		}
	}
}
