package knowledge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/testhome"
)

// childEnv makes the test binary a child process (see TestMain):
// "slow-sync ROOT" is a sync to be killed, "sync ROOT" and "query ROOT
// TEXT" are measured for their peak RSS.
const childEnv = "NERVE_KNOWLEDGE_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(strings.SplitN(spec, " ", 3)))
	}
	testhome.Main(m)
}

func runChild(args []string) int {
	var err error
	switch args[0] {
	case "slow-sync":
		_, err = Sync(context.Background(), SyncOptions{Root: args[1], commitEvery: 5 * time.Millisecond, Workers: 1})
	case "sync":
		_, err = Sync(context.Background(), SyncOptions{Root: args[1]})
	case "query":
		_, err = Query(context.Background(), []string{args[1]}, QueryOptions{Text: args[2]})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func bigTree(t testing.TB, n int) (string, map[string]string) {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("pkg%02d/file%04d.go", i%50, i)] = goFile(fmt.Sprintf("Alpha%d", i), fmt.Sprintf("Beta%d", i), fmt.Sprintf("Gamma%d", i))
	}
	return newRepo(t, files), files
}

// checkConsistent asserts the index is sound: SQLite's and FTS5's own
// integrity checks pass and every file's chunks are all there.
func checkConsistent(t *testing.T, root string) (files, chunks int) {
	t.Helper()
	db, err := openForRead(root, false)
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q %v", ok, err)
	}
	if _, err := db.Exec(`INSERT INTO fts(fts) VALUES('integrity-check')`); err != nil {
		t.Fatalf("fts integrity-check: %v", err)
	}
	var sum int
	db.QueryRow(`SELECT count(*), coalesce(sum(chunks), 0) FROM files`).Scan(&files, &sum)
	db.QueryRow(`SELECT count(*) FROM chunks`).Scan(&chunks)
	if sum != chunks {
		t.Fatalf("files say %d chunks, chunks table holds %d", sum, chunks)
	}
	var orphans int
	db.QueryRow(`SELECT count(*) FROM chunks WHERE path NOT IN (SELECT path FROM files)`).Scan(&orphans)
	if orphans != 0 {
		t.Fatalf("%d chunks of files the index does not know", orphans)
	}
	return files, chunks
}

// A sync killed with SIGKILL mid-way leaves a sound index holding the
// files it committed; the next sync completes it.
func TestKnowledgeKilledSyncIsRepaired(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a big tree")
	}
	root, files := bigTree(t, 1500)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=slow-sync "+root)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	committed := 0
	for committed < 150 {
		if time.Now().After(deadline) {
			t.Fatal("the child never committed 150 files")
		}
		select {
		case err := <-exited:
			t.Fatalf("the child finished before it could be killed (%v); make the tree bigger", err)
		case <-time.After(10 * time.Millisecond):
		}
		if db, err := openForRead(root, false); err == nil {
			db.QueryRow(`SELECT count(*) FROM files`).Scan(&committed)
			db.Close()
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	n, _ := checkConsistent(t, root)
	if n == 0 || n >= len(files) {
		t.Fatalf("killed at %d of %d files", n, len(files))
	}
	t.Logf("killed after %d of %d files", n, len(files))
	// The partial index answers.
	if _, err := Query(context.Background(), []string{root}, QueryOptions{Text: "Alpha1"}); err != nil {
		t.Fatalf("query after kill: %v", err)
	}
	r := mustSync(t, SyncOptions{Root: root})
	if r.Added+r.Unchanged != len(files) || r.Added < len(files)-n || r.Removed != 0 {
		t.Errorf("repairing sync: %+v (had %d)", r, n)
	}
	n, chunks := checkConsistent(t, root)
	if n != len(files) || chunks != 3*len(files) {
		t.Errorf("after repair: %d files, %d chunks", n, chunks)
	}
	hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "Gamma1499", Limit: 1})
	if err != nil || len(hits) != 1 || hits[0].Path != "pkg49/file1499.go" {
		t.Errorf("after repair: %v %v", paths(hits), err)
	}
}

// Ctrl-C: the sync stops after committing what it applied, and says so.
func TestKnowledgeCancelledSync(t *testing.T) {
	root, files := bigTree(t, 400)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Sync(ctx, SyncOptions{Root: root, commitEvery: time.Nanosecond, afterCommit: func(n int) {
		if n >= 50 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	n, _ := checkConsistent(t, root)
	if n < 50 || n >= len(files) {
		t.Fatalf("cancelled at %d of %d", n, len(files))
	}
	r := mustSync(t, SyncOptions{Root: root})
	if r.Added != len(files)-n {
		t.Errorf("resumed: %+v after %s files", r, strconv.Itoa(n))
	}
	checkConsistent(t, root)
}
