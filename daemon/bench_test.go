package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
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
	// The adapter alone, as a turn runs it (its own process group, stdout
	// and stderr read to the end, the turn's environment): local-thread
	// minus this and one commit is the engine's own share of a turn.
	b.Run("adapter-run", func(b *testing.B) {
		a, err := adapter.New("true", adapter.Spec{Type: "exec", Command: []string{truePath}})
		if err != nil {
			b.Fatal(err)
		}
		req := adapter.Request{Prompt: "work", Workdir: b.TempDir(), Env: []string{"NERVE_THREAD=thread-1", "NERVE_ROLE=w", "NERVE_STEP=1"}}
		for i := 0; i < b.N; i++ {
			if _, err := a.Run(context.Background(), req); err != nil {
				b.Fatalf("run: %v", err)
			}
		}
	})
	b.Run("local-thread", func(b *testing.B) { benchLocalThread(b, truePath, false) })
	// The same thread with every turn in bwrap, its network by allow-list
	// (the proxy and the bridge) and its own socket: what the sandbox adds
	// to a turn, beside local-thread in the same run.
	b.Run("local-thread-sandboxed", func(b *testing.B) {
		if err := sandbox.Available(); err != nil {
			b.Skip(err)
		}
		// The bridge runs inside: it is the nerve binary's sandbox-exec.
		bin := filepath.Join(b.TempDir(), "nerve")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/nerve").CombinedOutput(); err != nil {
			b.Fatalf("build nerve: %v\n%s", err, out)
		}
		benchSandbox, benchExecutable = sandbox.ModeBwrap, bin
		defer func() { benchSandbox, benchExecutable = sandbox.ModeNone, "" }()
		benchLocalThread(b, truePath, false)
	})
	// A claude-type agent (a script printing a result event with a cost)
	// under a daily cap: each turn's answer is charged to the adapter's day
	// in its commit, and the cap is read before each turn.
	b.Run("local-thread-spending", func(b *testing.B) { benchLocalThread(b, "claude", false) })
	// The same thread with a workspace: each turn opens the thread's
	// worktree (reused), and its Finish finds nothing to commit.
	b.Run("local-thread-workspace", func(b *testing.B) { benchLocalThread(b, truePath, true) })
	// With a workspace and an agent that changes one file per turn: a
	// commit on its behalf and a branch move each turn.
	b.Run("local-thread-workspace-edit", func(b *testing.B) {
		benchLocalThread(b, "", true)
	})
}

// benchSandbox is the daemon.sandbox of benchLocalThread's daemon: none
// unless a benchmark measures the sandbox.
var benchSandbox = sandbox.ModeNone

// benchExecutable is the nerve binary of benchLocalThread's daemon.
var benchExecutable string

// benchLocalThread runs one local thread of b.N turns; agent "" is a
// shell script that appends a line to a file of the worktree.
func benchLocalThread(b *testing.B, agent string, withWorkspace bool) {
	{
		home := b.TempDir()
		cfg := config.Defaults(home)
		cfg.Daemon.Sandbox = benchSandbox
		if agent == "" {
			agent = filepath.Join(home, "edit.sh")
			if err := os.WriteFile(agent, []byte("#!/bin/sh\necho \"$NERVE_STEP\" >> \"$NERVE_WORKDIR/turns.txt\"\n"), 0o700); err != nil {
				b.Fatal(err)
			}
		}
		cfg.Adapters["true"] = config.Adapter{Type: "exec", Command: []string{agent}}
		if agent == "claude" {
			script := filepath.Join(home, "claude.sh")
			if err := os.WriteFile(script, []byte(benchClaude), 0o700); err != nil {
				b.Fatal(err)
			}
			capUSD := 1e9
			cfg.Adapters["true"] = config.Adapter{Type: "claude", Binary: script, DailyUSD: &capUSD}
		}
		st, err := store.Open(config.Paths{Home: home}.DB(), time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		d := &Daemon{paths: config.Paths{Home: home}, log: slog.New(slog.DiscardHandler), store: st, cfg: cfg}
		d.opts.Executable = benchExecutable
		d.gate = reflex.NewGate(d.config, st, d.log)
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
		var prepare func(*workflow.Thread) error
		if withWorkspace {
			if _, err := exec.LookPath("git"); err != nil {
				b.Skip("no git binary")
			}
			repo := filepath.Join(home, "repo")
			os.MkdirAll(repo, 0o700)
			os.WriteFile(filepath.Join(repo, "README"), []byte("hi\n"), 0o600)
			for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README"},
				{"-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q", "-m", "first"}} {
				if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
					b.Fatalf("git %v: %v %s", args, err, out)
				}
			}
			prepare = func(t *workflow.Thread) error {
				return r.startWorkspace(context.Background(), t, workspace.Workspace{Repo: repo})
			}
		}
		if err := st.CreateThreadWith(th, prepare); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0, faults0 := selfCPU(b)
		if err := r.engine().Run(context.Background(), def, th); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The daemon's own CPU (all its threads; not the adapters'): on a
		// loaded machine a steadier figure than the wall time. Its page
		// faults: on a VM each costs tens of microseconds.
		cpu, faults := selfCPU(b)
		b.ReportMetric(float64((cpu-cpu0).Microseconds())/float64(b.N)/1000, "daemon-cpu-ms/turn")
		b.ReportMetric(float64(faults-faults0)/float64(b.N), "daemon-faults/turn")
		if th.Status != workflow.StatusCompleted || th.Step != b.N {
			b.Fatalf("thread %s after %d steps: %s", th.Status, th.Step, th.Error)
		}
		msgs, _ := st.Messages(th.ID)
		if len(msgs) != b.N || msgs[0].Error != nil {
			b.Fatalf("%d messages, first error %v", len(msgs), msgs[0].Error)
		}
		if withWorkspace && (msgs[0].Commit == "" || th.Workspace == nil) {
			b.Fatalf("no workspace at work: %+v %+v", msgs[0], th.Workspace)
		}
		if sp, _ := st.Spent(time.Now().UTC().Format(store.DayFormat)); agent == "claude" && sp["true"].Turns != int64(b.N) {
			b.Fatalf("spend charged for %d turns of %d", sp["true"].Turns, b.N) // (a run across midnight: rerun)
		}
		b.ReportMetric(float64(b.N), "turns")
	}
}

// benchClaude answers a turn as Claude Code does, with a cost.
const benchClaude = `#!/bin/sh
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s","total_cost_usd":0.01,"usage":{"input_tokens":100,"output_tokens":10}}'
`

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

// selfCPU is the user and system time this process has used, and its
// page faults so far.
func selfCPU(b *testing.B) (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt + ru.Majflt
}
