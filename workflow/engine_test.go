package workflow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "nerve.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func parse(t testing.TB, moderator string) *workflow.Definition {
	t.Helper()
	src := "workflow: w\nmoderator: '" + strings.ReplaceAll(moderator, "'", "''") + "'\nlimits: {max_steps: 6}\nroles:\n" +
		"  a: {adapter: x, prompt: A}\n  b: {adapter: x, prompt: B}\n" +
		"  c: {adapter: x, prompt: C, meta: {type: object, required: [ok], properties: {ok: {type: boolean}}}}\n"
	d, err := workflow.Parse("w.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newThread(t testing.TB, st *store.Store, d *workflow.Definition) *workflow.Thread {
	t.Helper()
	th := &workflow.Thread{Workflow: d.Name, Status: workflow.StatusRunning, Source: d.Source, CreatedAt: time.Now()}
	if err := st.CreateThread(th); err != nil {
		t.Fatal(err)
	}
	return th
}

// echo answers with the role and step; role c answers with meta.
func echo(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
	m := workflow.Message{Content: fmt.Sprintf("%s@%d", turn.Role, turn.Step)}
	if turn.Role == "c" {
		m.Meta = map[string]any{"ok": true}
	}
	return m
}

func run(t *testing.T, moderator string, turn workflow.TurnFunc) (*workflow.Thread, []workflow.Message, []workflow.Event) {
	t.Helper()
	st := openStore(t)
	d := parse(t, moderator)
	th := newThread(t, st, d)
	e := &workflow.Engine{Store: st, Turn: turn, Agent: "test-agent"}
	if err := e.Run(context.Background(), d, th); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.Thread(th.ID)
	msgs, _ := st.Messages(th.ID)
	evs, _ := st.Events(th.ID, 0)
	return stored, msgs, evs
}

const seq = `$count(messages) = 0 ? {"role": "a", "instruction": "start"} : $count(messages) = 1 ? {"role": "b"} : {"done": true}`

func TestSequentialTurns(t *testing.T) {
	th, msgs, evs := run(t, seq, echo)
	if th.Status != workflow.StatusCompleted || th.Result != "b@2" || th.Step != 2 {
		t.Fatalf("thread: %+v", th)
	}
	if len(msgs) != 2 || msgs[0].Content != "a@1" || msgs[0].Instruction != "start" || msgs[1].Agent != "test-agent" {
		t.Fatalf("messages: %+v", msgs)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := "thread.started turn.started turn.answered turn.started turn.answered thread.ended"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
}

func TestParallelTurnsRunTogether(t *testing.T) {
	var running, peak atomic.Int32
	slow := func(ctx context.Context, th *workflow.Thread, d *workflow.Definition, turn workflow.Turn, h []workflow.Message) workflow.Message {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		running.Add(-1)
		return echo(ctx, th, d, turn, h)
	}
	th, msgs, _ := run(t, `$count(messages) = 0 ? [{"role": "a"}, {"role": "b"}, {"role": "c"}] : {"done": true, "result": $count(messages)}`, slow)
	if th.Status != workflow.StatusCompleted || th.Result != float64(3) || len(msgs) != 3 {
		t.Fatalf("thread %+v, %d messages", th, len(msgs))
	}
	if peak.Load() != 3 {
		t.Fatalf("parallel turns ran %d at a time, want 3", peak.Load())
	}
}

func TestDoneWithoutResultTakesLastMeta(t *testing.T) {
	th, _, _ := run(t, `$count(messages) = 0 ? {"role": "c"} : {"done": true}`, echo)
	if m, ok := th.Result.(map[string]any); !ok || m["ok"] != true {
		t.Fatalf("result %v, want the last message's meta", th.Result)
	}
}

func TestFailAndGarbageAndMaxSteps(t *testing.T) {
	for mod, want := range map[string]string{
		`{"fail": "reviewer gave up"}`: "reviewer gave up",
		`"garbage"`:                    `moderator returned "garbage"`,
		`{"role": "a"}`:                "exceeded max_steps (6)",
	} {
		th, _, evs := run(t, mod, echo)
		if th.Status != workflow.StatusFailed || !strings.Contains(th.Error, want) {
			t.Fatalf("%s: thread %s %q, want failed with %q", mod, th.Status, th.Error, want)
		}
		if last := evs[len(evs)-1]; last.Type != workflow.EventThreadEnded || last.Status != workflow.StatusFailed {
			t.Fatalf("%s: last event %+v", mod, last)
		}
	}
}

func TestFailedTurnIsAMessageForTheModerator(t *testing.T) {
	broken := func(context.Context, *workflow.Thread, *workflow.Definition, workflow.Turn, []workflow.Message) workflow.Message {
		return workflow.Message{Error: &workflow.MessageError{Kind: "adapter", Message: "exit 1"}}
	}
	th, msgs, _ := run(t, `last = null ? {"role": "a"} : last.error ? {"fail": "saw " & last.error.kind} : {"done": true}`, broken)
	if th.Error != "saw adapter" || len(msgs) != 1 {
		t.Fatalf("thread %+v", th)
	}
}

// An interrupted thread resumes at the interrupted turn: finished turns
// are not run again and no message is stored twice.
func TestResumeAfterInterruption(t *testing.T) {
	st := openStore(t)
	d := parse(t, `$count(messages) < 3 ? {"role": "a"} : {"done": true}`)
	th := newThread(t, st, d)
	var calls sync.Map
	ctx, stop := context.WithCancel(context.Background())
	turn := func(ctx context.Context, th *workflow.Thread, d *workflow.Definition, turn workflow.Turn, h []workflow.Message) workflow.Message {
		n, _ := calls.LoadOrStore(turn.Step, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if turn.Step == 2 && n.(*atomic.Int32).Load() == 1 {
			stop() // the daemon dies during step 2
			<-ctx.Done()
		}
		return echo(ctx, th, d, turn, h)
	}
	e := &workflow.Engine{Store: st, Turn: turn}
	if err := e.Run(ctx, d, th); err == nil {
		t.Fatal("an interrupted run must report it")
	}
	stored, _ := st.Thread(th.ID)
	if stored.Status != workflow.StatusRunning || len(stored.Pending) != 1 || stored.Pending[0].Step != 2 {
		t.Fatalf("after interruption: %+v", stored)
	}
	if err := e.Run(context.Background(), d, stored); err != nil {
		t.Fatal(err)
	}
	msgs, _ := st.Messages(th.ID)
	if stored.Status != workflow.StatusCompleted || len(msgs) != 3 {
		t.Fatalf("resumed thread %s with %d messages", stored.Status, len(msgs))
	}
	for step := 1; step <= 3; step++ {
		n, _ := calls.Load(step)
		want := int32(1)
		if step == 2 {
			want = 2 // the interrupted turn runs again
		}
		if got := n.(*atomic.Int32).Load(); got != want {
			t.Fatalf("step %d ran %d times, want %d", step, got, want)
		}
	}
}

func TestCancelEndsThread(t *testing.T) {
	st := openStore(t)
	d := parse(t, `{"role": "a"}`)
	th := newThread(t, st, d)
	ctx, cancel := context.WithCancelCause(context.Background())
	turn := func(ctx context.Context, _ *workflow.Thread, _ *workflow.Definition, _ workflow.Turn, _ []workflow.Message) workflow.Message {
		cancel(workflow.ErrCancelled)
		<-ctx.Done()
		return workflow.Message{}
	}
	if err := (&workflow.Engine{Store: st, Turn: turn}).Run(ctx, d, th); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.Thread(th.ID)
	msgs, _ := st.Messages(th.ID)
	if stored.Status != workflow.StatusCancelled || len(msgs) != 0 {
		t.Fatalf("thread %s, %d messages", stored.Status, len(msgs))
	}
}
