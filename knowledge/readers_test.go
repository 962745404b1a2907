package knowledge

import (
	"context"
	"errors"
	"os"
	"reflect"
	"sync"
	"testing"
)

// TestReadersAnswerAsQuery: queries on kept-open indexes rank as a fresh
// Query does, see a later sync, and follow an index replaced on disk.
func TestReadersAnswerAsQuery(t *testing.T) {
	root := newRepo(t, corpus)
	mustSync(t, SyncOptions{Root: root})
	var r Readers
	defer r.Close()
	ctx := context.Background()
	for _, q := range []string{"signal bus", "renew lease backoff", "where are RFC 3339 timestamps parsed"} {
		want, err := Query(ctx, []string{root}, QueryOptions{Text: q, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := r.Query(ctx, []string{root}, QueryOptions{Text: q, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: kept open %v, fresh %v", q, paths(got), paths(want))
			}
		}
	}

	// Several queries at once share the open index.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Query(ctx, []string{root}, QueryOptions{Text: "signal bus"}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// A sync through another handle is seen by the open one.
	writeTree(t, root, map[string]string{"retry/jitter.go": "package retry\n\n// Jitter spreads the retries of rate-limited adapters.\nfunc Jitter() {}\n"})
	mustSync(t, SyncOptions{Root: root})
	hits, err := r.Query(ctx, []string{root}, QueryOptions{Text: "jitter of retries", Limit: 1})
	if err != nil || len(hits) != 1 || hits[0].Path != "retry/jitter.go" {
		t.Fatalf("after a sync: %v %v", paths(hits), err)
	}

	// An index removed and built anew (with no query between, so its
	// inode may be the old one's) is opened again.
	if err := os.Remove(IndexPath(root)); err != nil {
		t.Fatal(err)
	}
	writeTree(t, root, map[string]string{"retry/jitter.go": "package retry\n"})
	mustSync(t, SyncOptions{Root: root})
	if hits, err := r.Query(ctx, []string{root}, QueryOptions{Text: "spreads"}); err != nil || len(hits) != 0 {
		t.Fatalf("index rebuilt: %v %v, want no hit for the removed comment", paths(hits), err)
	}
	if err := os.Remove(IndexPath(root)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Query(ctx, []string{root}, QueryOptions{Text: "signal bus"}); !errors.As(err, new(*NoIndexError)) {
		t.Fatalf("index removed: %v, want NoIndexError", err)
	}
}
