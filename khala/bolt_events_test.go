package khala

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

// scanSeqs lists a thread's event numbers straight from the file.
func scanSeqs(t *testing.T, b *Bolt, n uint64) []uint64 {
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
func TestBoltEventIndex(t *testing.T) {
	ts := newTestServer(t)
	b := ts.store.(*Bolt)
	a := ts.agent("a")
	a.putWorkflow(panelWF)
	id := a.start("panel", nil, "")
	n, _ := ParseThreadID(id)
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
	turns := a.claim(map[string]any{"max": 2})
	if len(turns) != 2 {
		t.Fatalf("claimed %+v", turns)
	}
	check("after the claims")
	// Step 2 answered first, then step 1: events land at step 2, then 1.
	a.respond(turns[1], "B", nil)
	check("after the second step's answer")
	a.respond(turns[0], "A", nil)
	check("after the first step's answer")
	if th := a.thread(id); th.Status != workflow.StatusCompleted {
		t.Fatalf("thread %s", th.Status)
	}

	// A store opened again knows nothing until it scans.
	path := b.db.Path()
	ts.stop()
	b2, err := OpenBolt(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	b = b2
	check("reopened")
	check("reopened, index built")
}
