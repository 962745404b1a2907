package khaladbtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// count reads the counter UpdateThreadReruns keeps in a thread's input.
func count(v *khaladb.ThreadView) int {
	n, _ := strconv.Atoi(fmt.Sprint(v.Thread.Input["count"]))
	return n
}

// UpdateThreadReruns: UpdateThread's fn may run more than once (a claim
// or heartbeat moved a turn it read), and only the run whose change is
// committed counts. Many writers each add one to a counter kept in the
// thread and write back the turn they read, while its holder heartbeats
// it: no increment is lost or doubled, and no write from a stale view
// moves the lease back. A change given up on (ErrConflict) is tried again,
// as the server's client would.
func UpdateThreadReruns(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	v := StartThread(t, s, "rerun", Epoch, TurnSpec{Role: "a", Lease: time.Hour})
	turns := ClaimAll(t, s, "a", Epoch)
	if len(turns) != 1 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	tk := turns[0]
	const writers, each = 8, 5
	var (
		runs      atomic.Int64
		conflicts atomic.Int64
		wg        sync.WaitGroup
		lastHB    khaladb.Turn
		hbDone    = make(chan struct{})
		writing   atomic.Int64
	)
	writing.Store(writers)
	go func() { // the holder heartbeats until every writer is done
		defer close(hbDone)
		for i := 1; writing.Load() > 0 || i < 20; i++ {
			// Every third of the lease: every fourth or so writes.
			hb, err := s.Heartbeat(ctx, tk.ID, tk.Claim, tk.Agent, Epoch.Add(time.Duration(i)*20*time.Minute))
			if err != nil {
				t.Errorf("heartbeat %d: %v", i, err)
				return
			}
			lastHB = hb
		}
	}()
	for range writers {
		wg.Go(func() {
			defer writing.Add(-1)
			for range each {
				err := khaladb.ErrConflict
				for errors.Is(err, khaladb.ErrConflict) { // given up on: the caller's to retry
					err = s.UpdateThread(ctx, v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
						runs.Add(1)
						open := v.Turn(tk.ID)
						if open == nil {
							return nil, fmt.Errorf("turn %s not in the view", tk.ID)
						}
						n := count(v) + 1
						c := &khaladb.ThreadChange{Thread: v.Thread, Turns: []khaladb.Turn{*open}}
						c.Thread.Input = map[string]any{"count": n}
						c.Events = []workflow.Event{{At: Epoch, Type: workflow.EventDetection, Thread: v.Thread.ID, Message: fmt.Sprint("update ", n)}}
						return c, nil
					})
					if errors.Is(err, khaladb.ErrConflict) {
						conflicts.Add(1)
					}
				}
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-hbDone
	if t.Failed() {
		return
	}
	got, err := s.Thread(ctx, v.Thread.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(got); n != writers*each {
		t.Errorf("counter %d after %d committed updates (%d runs of fn)", n, writers*each, runs.Load())
	}
	if got.Thread.Version <= v.Thread.Version {
		t.Errorf("version %d after updates, was %d", got.Thread.Version, v.Thread.Version)
	}
	evs, err := s.Events(ctx, v.Thread.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range evs {
		if e.Type == workflow.EventDetection {
			seen[e.Message]++
		}
	}
	for n := 1; n <= writers*each; n++ {
		if k := seen[fmt.Sprint("update ", n)]; k != 1 {
			t.Errorf("update %d recorded %d times", n, k)
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct updates recorded, want %d", len(seen), writers*each)
	}
	stored, err := s.Turn(ctx, tk.ID)
	if err != nil || !stored.LeaseExpires.Equal(lastHB.LeaseExpires) || stored.State != khaladb.TurnClaimed {
		t.Errorf("turn after the updates: lease %s, %s (%v); the last heartbeat made it %s",
			stored.LeaseExpires, stored.State, err, lastHB.LeaseExpires)
	}
	t.Logf("%d runs of fn for %d commits (%d given up with ErrConflict)", runs.Load(), writers*each, conflicts.Load())
}

// UpdateThreadOutcomes: what UpdateThread returns and leaves behind for
// each kind of fn, and for a thread that does not exist.
func UpdateThreadOutcomes(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	v := StartThread(t, s, "outcomes", Epoch, TurnSpec{Role: "a"})
	errMine := errors.New("mine")
	for _, c := range []struct {
		name    string
		thread  string
		fn      func(*khaladb.ThreadView) (*khaladb.ThreadChange, error)
		want    error
		changes bool
	}{
		{"no change", v.Thread.ID, func(*khaladb.ThreadView) (*khaladb.ThreadChange, error) { return nil, nil }, nil, false},
		{"fn's error as is", v.Thread.ID, func(*khaladb.ThreadView) (*khaladb.ThreadChange, error) { return nil, errMine }, errMine, false},
		{"a change", v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			c := &khaladb.ThreadChange{Thread: v.Thread}
			c.Thread.Input = map[string]any{"count": 1}
			return c, nil
		}, nil, true},
		{"unknown thread", "thread-999999", func(*khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			t.Error("fn ran for a thread that does not exist")
			return nil, nil
		}, khaladb.ErrNotFound, false},
		{"not a thread id", "nope", func(*khaladb.ThreadView) (*khaladb.ThreadChange, error) { return nil, nil }, khaladb.ErrNotFound, false},
	} {
		before, _ := s.Thread(ctx, v.Thread.ID)
		err := s.UpdateThread(ctx, c.thread, c.fn)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		after, _ := s.Thread(ctx, v.Thread.ID)
		if moved := after.Thread.Version != before.Thread.Version; moved != c.changes {
			t.Errorf("%s: version %d -> %d", c.name, before.Thread.Version, after.Thread.Version)
		}
	}

	// An answer closes its turn and, the last one, ends the thread: the
	// view keeps its message and no open turn, the turn reads answered.
	tk := ClaimAll(t, s, "a", Epoch)[0]
	Answer(t, s, tk, "done", Epoch.Add(time.Second))
	got, err := s.Thread(ctx, v.Thread.ID)
	if err != nil || got.Thread.Status != workflow.StatusCompleted || len(got.Turns) != 0 ||
		len(got.Messages) != 1 || got.Messages[0].Content != "done" || got.Messages[0].Step != 1 {
		t.Fatalf("thread after its answer: %+v, %v", got, err)
	}
	if done, err := s.Turn(ctx, tk.ID); err != nil || done.State != khaladb.TurnAnswered {
		t.Errorf("turn after its answer: %+v, %v", done, err)
	}
	if _, err := s.Turn(ctx, khaladb.TurnID(v.Thread.ID, 7)); !errors.Is(err, khaladb.ErrNotFound) {
		t.Errorf("a turn never queued: %v, want ErrNotFound", err)
	}
	if _, err := s.Thread(ctx, "thread-999999"); !errors.Is(err, khaladb.ErrNotFound) {
		t.Errorf("a thread never created: %v, want ErrNotFound", err)
	}
	if st, err := s.Stats(context.Background()); err != nil || st != (khaladb.Stats{}) {
		t.Errorf("stats after the only thread ended: %+v, %v", st, err)
	}
}
