package khalabolt

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
)

// A file written before priorities (format 1: queue keys without one,
// turn heads without one) opens as format 2 with every queued turn in
// its old order at priority 0, ahead of nothing of higher priority.
func TestOpenUpgradesFormat1Queue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	b, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		v := khaladbtest.StartThread(t, b, "w", khaladbtest.Epoch.Add(time.Duration(i)*time.Second), khaladbtest.TurnSpec{Role: "r"})
		ids = append(ids, khaladb.TurnID(v.Thread.ID, 1))
	}
	b.Close()
	// Rewrite it as format 1 wrote it.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		ix := tx.Bucket(bIndex)
		var keys [][]byte
		c := ix.Cursor()
		for k, _ := c.Seek([]byte{ixQueue}); k != nil && k[0] == ixQueue; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			v := append([]byte(nil), ix.Get(k)...)
			n, step := queueParse(k)
			raw := tx.Bucket(bThreads).Get(turnKey(n, step))
			h, body, err := splitTurn(raw)
			if err != nil {
				return err
			}
			old := appendHead(nil, h)
			old[0] = turnFormat1
			old = append(old[:headSize], old[headSize+4:]...) // no priority
			if err := tx.Bucket(bThreads).Put(turnKey(n, step), append(old, body...)); err != nil {
				return err
			}
			if err := ix.Delete(k); err != nil {
				return err
			}
			if err := ix.Put(ixKey(ixQueue, h.FirstQueued, n, step), v); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kFormat, []byte{1})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, err = Open(path, time.Second)
	if err != nil {
		t.Fatalf("open a format 1 file: %v", err)
	}
	defer b.Close()
	urgent := khaladbtest.StartThread(t, b, "w", khaladbtest.Epoch.Add(time.Hour), khaladbtest.TurnSpec{Role: "r", Priority: 1})
	got, err := b.Claim(t.Context(), khaladb.ClaimQuery{Agent: "a", Max: 10, Now: khaladbtest.Epoch.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{khaladb.TurnID(urgent.Thread.ID, 1)}, ids...)
	if len(got) != len(want) {
		t.Fatalf("claimed %d turns, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i] {
			t.Errorf("claim %d: %s, want %s", i, got[i].ID, want[i])
		}
	}
}
