package daemon

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkTurn compares one turn of a local thread (moderator, bbolt
// commit, snapshot, exec adapter running `true`) with a bare fork+exec of
// `true`, side by side in one run. Run with -benchtime 200x: one op is one
// turn, so the local thread has 200 turns.
func BenchmarkTurn(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	b.Run("bare-exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-bbolt-commit", func(b *testing.B) { // the durability floor of a turn
		db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{NoFreelistSync: true})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		val := make([]byte, 600)
		for i := 0; i < b.N; i++ {
			err := db.Update(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte("b"))
				if err != nil {
					return err
				}
				return bk.Put([]byte(strconv.Itoa(i)), val)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("local-thread", func(b *testing.B) {
		home := b.TempDir()
		cfg := config.Defaults(home)
		cfg.Adapters["true"] = config.Adapter{Type: "exec", Command: []string{truePath}}
		st, err := store.Open(config.Paths{Home: home}.DB(), time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		d := &Daemon{paths: config.Paths{Home: home}, log: slog.New(slog.DiscardHandler), store: st, cfg: cfg}
		r := newRunner(d, context.Background())
		def, err := workflow.Parse("bench.yaml", []byte(`workflow: bench
moderator: 'step < input.n ? {"role": "w", "instruction": "go"} : {"done": true}'
inputs: {n: {type: integer}}
limits: {max_steps: 100000}
roles:
  w: {adapter: "true", prompt: work}
`), nil)
		if err != nil {
			b.Fatal(err)
		}
		th := &workflow.Thread{Workflow: def.Name, Status: workflow.StatusRunning, Input: map[string]any{"n": b.N},
			Source: def.Source, Workdir: home}
		if err := st.CreateThread(th); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		if err := r.engine().Run(context.Background(), def, th); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if th.Status != workflow.StatusCompleted || th.Step != b.N {
			b.Fatalf("thread %s after %d steps: %s", th.Status, th.Step, th.Error)
		}
		msgs, _ := st.Messages(th.ID)
		if len(msgs) != b.N || msgs[0].Error != nil {
			b.Fatalf("%d messages, first error %v", len(msgs), msgs[0].Error)
		}
		b.ReportMetric(float64(b.N), "turns")
	})
}

// BenchmarkModerator evaluates the code-review example's moderator against
// a thread of four messages.
func BenchmarkModerator(b *testing.B) {
	def, err := workflow.LoadFile("../examples/code-review.yaml")
	if err != nil {
		b.Fatal(err)
	}
	th := &workflow.Thread{ID: "thread-1", Workflow: def.Name, Step: 4, Input: map[string]any{"change": "Add retries", "max_rounds": 3}}
	var msgs []workflow.Message
	for i := 1; i <= 4; i++ {
		m := workflow.Message{Step: i, Role: "author", Agent: "a", Content: "answer " + strconv.Itoa(i), At: time.Now()}
		if i%2 == 0 {
			m.Role, m.Meta = "reviewer", map[string]any{"approved": i == 4, "findings": []any{"one", "two"}}
		}
		msgs = append(msgs, m)
	}
	state := workflow.NewState(th, msgs)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dec, err := workflow.Route(ctx, def, state)
		if err != nil || !dec.Done {
			b.Fatalf("%+v %v", dec, err)
		}
	}
}
