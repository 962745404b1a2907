package sense

import (
	"context"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nerve-agents/nerve/reflex"
)

// Capacity runs in a synctest bubble: a waiter is known to be parked
// (synctest.Wait) before the release that must wake it, and the short
// timeouts take no time.
func TestCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCapacity(2)
		ctx := context.Background()
		if n, _ := c.Acquire(ctx, 5); n != 2 {
			t.Fatalf("took %d of 2 free slots", n)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := c.Acquire(short, 1); err == nil {
			t.Fatal("acquired a slot while none was free")
		}
		got := make(chan int)
		go func() { n, _ := c.Acquire(ctx, 3); got <- n }()
		synctest.Wait() // the waiter is parked
		c.Release(1)
		if n := <-got; n != 1 {
			t.Fatalf("woke with %d slots, want 1", n)
		}
		c.SetMax(1) // 2 in use, max 1: nothing free until 2 are released
		c.Release(1)
		if used, max := c.Used(); used != 1 || max != 1 {
			t.Fatalf("used %d of %d", used, max)
		}
		short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel2()
		if _, err := c.Acquire(short2, 1); err == nil {
			t.Fatal("a shrunk capacity must not hand out slots in use")
		}
	})
}

func TestIntervalSense(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var ticks []time.Time
		start := time.Now()
		go NewInterval("tick", time.Minute).Run(ctx, func(s reflex.Signal) {
			if s.Sense != "tick" {
				t.Errorf("signal %+v", s)
			}
			ticks = append(ticks, s.At)
		})
		time.Sleep(150 * time.Second)
		synctest.Wait()
		if len(ticks) != 2 || ticks[0].Sub(start) != time.Minute || ticks[1].Sub(start) != 2*time.Minute {
			t.Fatalf("ticks %v after a start at %v: want one a minute, the first a minute in", ticks, start)
		}
	})
}

// The file sense watches a file through its directory: a created file is
// signalled, a sibling is not. Real inotify events cannot run in a bubble,
// so the test orders them instead: a second write of the watched file is
// signalled after everything the first batch could hold.
func TestFileSense(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	files := make(chan reflex.Signal, 10)
	f := NewFile("watch", []string{dir + "/todo.txt"})
	go f.Run(ctx, func(s reflex.Signal) { files <- s })
	deadline := time.Now().Add(5 * time.Second)
	for f.State() != "watching" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	next := func() reflex.Signal {
		t.Helper()
		select {
		case s := <-files:
			return s
		case <-time.After(5 * time.Second):
			t.Fatal("no signal for a written file")
			return reflex.Signal{}
		}
	}
	writeFile(t, dir+"/other.txt")
	writeFile(t, dir+"/todo.txt")
	if s := next(); s.Path != dir+"/todo.txt" {
		t.Fatalf("signal for %s, want todo.txt only", s.Path)
	}
	// inotify reports other.txt before todo.txt, so a signal for it would
	// come before this one.
	writeFile(t, dir+"/todo.txt")
	if s := next(); s.Path != dir+"/todo.txt" {
		t.Fatalf("signal for %s, want todo.txt only", s.Path)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
