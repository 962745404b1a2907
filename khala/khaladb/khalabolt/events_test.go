package khalabolt

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/workflow"
)

// scanSeqs lists a thread's event numbers straight from the file.
func scanSeqs(t *testing.T, b *Store, n uint64) []uint64 {
	t.Helper()
	var out []uint64
	b.db.View(func(tx *bolt.Tx) error {
		prefix := append(k8(n), regionSteps)
		c := tx.Bucket(bThreads).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if seq := binary.BigEndian.Uint64(k[13:]); seq != 0 {
				out = append(out, seq)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// The event index answers "events after n" exactly as a scan of the file
// does, before it is complete, once it is, and after events were stored
// at an earlier step than the last one (parallel turns answered out of
// order); a reopened store starts from a scan again.
func TestEventIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	b, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v := khaladbtest.StartThread(t, b, "panel", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"}, khaladbtest.TurnSpec{Role: "b"})
	id := v.Thread.ID
	n, _ := khaladb.ParseThreadID(id)
	check := func(when string) {
		t.Helper()
		all := scanSeqs(t, b, n)
		for after := uint64(0); after <= uint64(len(all)); after++ {
			got, err := b.Events(t.Context(), id, after, 0)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, e := range got {
				seqs = append(seqs, e.Seq)
				if e.Type == "" || e.Thread != id {
					t.Fatalf("%s: event %d read back as %+v", when, e.Seq, e)
				}
			}
			var want []uint64
			for _, s := range all {
				if s > after {
					want = append(want, s)
				}
			}
			if !slices.Equal(seqs, want) {
				t.Fatalf("%s: events after %d: got %v, want %v", when, after, seqs, want)
			}
		}
		if got, _ := b.Events(t.Context(), id, 0, 2); len(got) != min(2, len(all)) {
			t.Fatalf("%s: limit 2 gave %d events", when, len(got))
		}
	}
	check("new thread, index not built")
	check("index built by the first read")
	turns := khaladbtest.ClaimAll(t, b, "a", khaladbtest.Epoch)
	if len(turns) != 2 {
		t.Fatalf("claimed %+v", turns)
	}
	check("after the claims")
	// Step 2 answered first, then step 1: events land at step 2, then 1.
	khaladbtest.Answer(t, b, turns[1], "B", khaladbtest.Epoch)
	check("after the second step's answer")
	khaladbtest.Answer(t, b, turns[0], "A", khaladbtest.Epoch)
	check("after the first step's answer")
	if th, err := b.Thread(t.Context(), id); err != nil || th.Thread.Status != workflow.StatusCompleted {
		t.Fatalf("thread %+v, %v", th, err)
	}

	// A store opened again knows nothing until it scans.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	b = b2
	check("reopened")
	check("reopened, index built")
}
