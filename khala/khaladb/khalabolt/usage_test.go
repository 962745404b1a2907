package khalabolt

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/workflow"
)

// A file written before the rollup existed gets it from its answers when
// opened.
func TestUsageRollupFilledFromOlderFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	b, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	for _, wf := range []string{"review", "fix"} {
		v := khaladbtest.StartThread(t, b, wf, day)
		err := b.UpdateThread(t.Context(), v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			c := &khaladb.ThreadChange{Thread: v.Thread}
			for step, tokens := range []int64{100, 200} {
				c.Messages = append(c.Messages, workflow.Message{Step: step + 1, Role: "author", Agent: "a", Adapter: "codex", At: day,
					Usage: &usage.Usage{Model: "gpt", InputTokens: usage.Int(tokens)}})
			}
			c.Messages = append(c.Messages, workflow.Message{Step: 3, Role: "human", At: day}) // no usage
			return c, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Written without rollup rows, then the rollup dropped: an older file.
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bUsage) }); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rows, err := b.Usage(t.Context(), usage.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	r := usage.Build(rows, "workflow", usage.Filter{})
	if len(r.Groups) != 2 || r.Groups[0].InputTokens != 300 || r.Groups[1].InputTokens != 300 || r.Total.Messages != 4 {
		t.Fatalf("rollup after reopen: %+v", r)
	}
}
