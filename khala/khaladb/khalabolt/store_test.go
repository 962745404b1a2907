package khalabolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/khala/khaladb/khaladbtest"
	"github.com/nerve-agents/nerve/workflow"
)

func openTestBolt(t testing.TB) *Store {
	t.Helper()
	b, err := Open(filepath.Join(t.TempDir(), "k.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// waiting counts the requests waiting for the commit under way.
func (w *writer) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// waitUntil waits for cond, failing t after a while.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The storage contract (khaladbtest), on a fresh file each time.
func TestContract(t *testing.T) {
	khaladbtest.Exercise(t, func(t testing.TB) khaladb.Storage { return openTestBolt(t) })
}

// Requests that arrive while a commit is on disk share the next one, and
// one that breaks its transaction fails alone.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	b := openTestBolt(t)
	hold, held := make(chan struct{}), make(chan struct{})
	go b.update(func(tx *bolt.Tx) error { // the leader, kept busy
		close(held)
		<-hold
		return nil
	})
	<-held
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.update(func(tx *bolt.Tx) error {
				if i == 3 {
					return boom
				}
				return tx.Bucket(bMeta).Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
			})
		}()
	}
	waitUntil(t, "all ten wait behind the leader", func() bool { return b.w.waiting() == len(errs) })
	close(hold)
	wg.Wait()
	for i, err := range errs {
		if (i == 3) != errors.Is(err, boom) || (i != 3 && err != nil) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	b.db.View(func(tx *bolt.Tx) error {
		for i := range errs {
			if got := tx.Bucket(bMeta).Get(fmt.Appendf(nil, "k%d", i)) != nil; got != (i != 3) {
				t.Errorf("key %d stored: %v", i, got)
			}
		}
		return nil
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.update(func(*bolt.Tx) error { return nil }); !errors.Is(err, khaladb.ErrClosed) {
		t.Fatalf("update after close: %v", err)
	}
}

func TestTurnRecordRoundTrip(t *testing.T) {
	now := time.Now().UTC()
	for _, tk := range []khaladb.Turn{
		{ID: "thread-1.1", Thread: "thread-1", Workflow: "w", Step: 1, Role: "r", Instruction: "do", Prompt: "p",
			State: khaladb.TurnQueued, Attempt: 1, MaxAttempts: 3, Lease: time.Minute, Idle: time.Hour, FirstQueued: now,
			QueuedAt: now, IdleAt: now.Add(time.Hour), Rev: 4},
		{ID: "thread-9.2", Thread: "thread-9", Workflow: "w", Step: 2, Role: "r", State: khaladb.TurnClaimed, Attempt: 2,
			Lease: time.Second, Claim: khaladb.NewClaimID(), Agent: "agent-1", FirstQueued: now, QueuedAt: now,
			ClaimedAt: now, LeaseExpires: now.Add(time.Second), Rev: 9},
	} {
		body, err := encodeTurnBody(&tk)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeTurn(turnValue(headOf(&tk), body))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tk) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, tk)
		}
	}
	// A closed turn keeps no prompt.
	closed := khaladb.Turn{ID: "thread-1.1", Prompt: "secret plan", State: khaladb.TurnAnswered}
	body, _ := encodeTurnBody(&closed)
	if got, _ := decodeTurn(turnValue(headOf(&closed), body)); got.Prompt != "" {
		t.Fatalf("closed turn kept its prompt")
	}
	for _, bad := range [][]byte{nil, {1}, {2, 1}, make([]byte, headSize), append(make([]byte, headSize+1), 200)} {
		if _, err := decodeTurn(bad); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
}

func TestOpenRefusesUnknownFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucketIfNotExists(bMeta)
		return b.Put(kFormat, []byte{99})
	})
	db.Close()
	if _, err := Open(path, time.Second); err == nil {
		t.Fatal("opened a file of an unknown format")
	}
}

// Thread numbers cost no commit of their own: a created thread's number is
// stored with it, so a reopened file goes on after the last created one,
// and a number handed out but never used may be handed out again.
func TestThreadNumbersAfterReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	b, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for want := 1; want <= 3; want++ {
		id, err := b.NextThreadID(ctx)
		if err != nil || id != khaladb.ThreadID(uint64(want)) {
			t.Fatalf("id %d: %q %v", want, id, err)
		}
		if want == 3 {
			break // thread-3 is never created
		}
		c := &khaladb.ThreadChange{Thread: khaladb.Thread{Thread: workflow.Thread{ID: id, Workflow: "w", Status: workflow.StatusRunning}}}
		if err := b.CreateThread(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if _, err := b.NextThreadID(ctx); !errors.Is(err, khaladb.ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
	b, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if id, _ := b.NextThreadID(ctx); id != "thread-3" {
		t.Fatalf("after reopen: %q, want thread-3 (after the last created thread-2)", id)
	}
}

// A child turn's thread id is never handed out again after a restart,
// though the child thread was not created yet.
func TestChildIDsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	b, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v := khaladbtest.StartThread(t, b, "fanout", khaladbtest.Epoch, khaladbtest.TurnSpec{Role: "a"})
	child, err := b.NextThreadID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = b.UpdateThread(t.Context(), v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := &khaladb.ThreadChange{Thread: v.Thread}
		c.Thread.Step = 2
		c.Turns = []khaladb.Turn{{ID: khaladb.TurnID(v.Thread.ID, 2), Thread: v.Thread.ID, Workflow: "fanout", Step: 2, Role: "review",
			State: khaladb.TurnChild, Child: child, FirstQueued: khaladbtest.Epoch, LeaseExpires: khaladbtest.Epoch}}
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if next, _ := b.NextThreadID(t.Context()); next == child {
		t.Fatalf("after a restart the next id is %s again, the child turn's", next)
	}
}

// The usage rollup's cost per answer commit (khaladbtest.BenchAnswerCommit).
func BenchmarkAnswerCommit(b *testing.B) { khaladbtest.BenchAnswerCommit(b, openTestBolt(b)) }
