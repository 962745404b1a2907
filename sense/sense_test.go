package sense

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/reflex"
)

func TestCapacity(t *testing.T) {
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
	time.Sleep(20 * time.Millisecond)
	c.Release(1)
	select {
	case n := <-got:
		if n != 1 {
			t.Fatalf("woke with %d slots, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a release did not wake the waiter")
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
}

func TestIntervalAndFileSenses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan reflex.Signal, 10)
	go NewInterval("tick", 20*time.Millisecond).Run(ctx, func(s reflex.Signal) { ticks <- s })
	for i := 0; i < 2; i++ {
		select {
		case s := <-ticks:
			if s.Sense != "tick" {
				t.Fatalf("signal %+v", s)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no tick")
		}
	}

	dir := t.TempDir()
	files := make(chan reflex.Signal, 10)
	f := NewFile("watch", []string{dir + "/todo.txt"})
	go f.Run(ctx, func(s reflex.Signal) { files <- s })
	deadline := time.Now().Add(5 * time.Second)
	for f.State() != "watching" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	writeFile(t, dir+"/other.txt")
	writeFile(t, dir+"/todo.txt")
	select {
	case s := <-files:
		if s.Path != dir+"/todo.txt" {
			t.Fatalf("signal for %s, want todo.txt only", s.Path)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no signal for a created file")
	}
	select {
	case s := <-files:
		t.Fatalf("unexpected signal %+v", s)
	case <-time.After(400 * time.Millisecond):
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
