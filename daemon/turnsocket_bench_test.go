package daemon

import (
	"context"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// BenchmarkTurnSocket is what a turn's socket costs: its open and close
// alone, and a local thread's turn (exec adapter running `true`, no
// sandbox) without it and with it, side by side in one run. Run with
// -benchtime 200x: one op is one turn.
func BenchmarkTurnSocket(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	b.Run("open-close", func(b *testing.B) {
		d, own, _, _ := turnSocketDaemon(b)
		ts := newTurnSockets(d)
		turn := &reflex.Turn{Ref: "child#" + own.ID, Step: 1, Workdir: b.TempDir()}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_, end, err := ts.forTurn(turn)
			if err != nil {
				b.Fatal(err)
			}
			end()
		}
	})
	// One request on the open socket, for scale: what a `nerve thread
	// messages` inside a turn pays on it besides its process start.
	b.Run("ping", func(b *testing.B) {
		d, own, _, _ := turnSocketDaemon(b)
		path, end, err := newTurnSockets(d).forTurn(&reflex.Turn{Ref: "child#" + own.ID, Step: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer end()
		c := NewTurnClient(path)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := c.Ping(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("turn-without", func(b *testing.B) { benchSocketTurns(b, truePath, false) })
	b.Run("turn-with-socket", func(b *testing.B) { benchSocketTurns(b, truePath, true) })
}

// benchSocketTurns runs one local thread of b.N turns of agent, with the
// executor the daemon builds, its per-turn services those of withSocket.
func benchSocketTurns(b *testing.B, agent string, withSocket bool) {
	home := b.TempDir()
	cfg := config.Defaults(home)
	cfg.Daemon.Sandbox = sandbox.ModeNone
	cfg.Adapters["true"] = config.Adapter{Type: "exec", Command: []string{agent}}
	st, err := store.Open(config.Paths{Home: home}.DB(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	d := &Daemon{paths: config.Paths{Home: home}, log: slog.New(slog.DiscardHandler), store: st, cfg: cfg}
	d.gate = reflex.NewGate(d.config, st, d.log)
	r := newRunner(d, context.Background())
	var services []reflex.TurnService
	if withSocket {
		services = []reflex.TurnService{newTurnSockets(d).service}
	}
	r.exec = reflex.NewExecutor(reflex.Deps{Config: d.config, Home: home, Snapshots: r.snaps, Procs: r, Tracker: r,
		Log: d.log, Workspaces: r.ws, Scratch: r.scratch, Gate: d.gate, TurnServices: services})
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
	cpu0, _ := selfCPU(b)
	if err := r.engine().Run(context.Background(), def, th); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu, _ := selfCPU(b)
	b.ReportMetric(float64((cpu-cpu0).Microseconds())/float64(b.N)/1000, "daemon-cpu-ms/turn")
	if th.Status != workflow.StatusCompleted || th.Step != b.N {
		b.Fatalf("thread %s after %d steps: %s", th.Status, th.Step, th.Error)
	}
	if msgs, _ := st.Messages(th.ID); len(msgs) != b.N || msgs[0].Error != nil {
		b.Fatalf("%d messages, first error %v", len(msgs), msgs[0].Error)
	}
}
