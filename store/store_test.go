package store

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nerve.db")
	st, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// bbolt's flock is per open file description, so a second open in this
	// process contends like a second daemon would.
	_, err = Open(path, 100*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

func TestThreadsMessagesEvents(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "nerve.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := &workflow.Thread{Workflow: "w", Status: workflow.StatusRunning}
	b := &workflow.Thread{Workflow: "v", Status: workflow.StatusRunning}
	if err := st.CreateThread(a); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateThread(b); err != nil {
		t.Fatal(err)
	}
	if a.ID != "thread-1" || b.ID != "thread-2" {
		t.Fatalf("ids %s %s", a.ID, b.ID)
	}
	changed := st.Changed(a.ID)
	m := workflow.Message{Step: 1, Role: "r", Content: "first"}
	if err := st.Commit(workflow.Update{Thread: a, Messages: []workflow.Message{m}, Events: []workflow.Event{{Type: workflow.EventTurnAnswered, Step: 1}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("a commit must wake followers")
	}
	m.Content = "again"
	st.Commit(workflow.Update{Thread: a, Messages: []workflow.Message{m}})
	msgs, _ := st.Messages(a.ID)
	if len(msgs) != 1 || msgs[0].Content != "again" {
		t.Fatalf("a step stored twice must keep one message: %+v", msgs)
	}
	evs, _ := st.Events(a.ID, 0)
	if len(evs) != 2 || evs[0].Type != workflow.EventThreadStarted || evs[1].Seq != 2 {
		t.Fatalf("events %+v", evs)
	}
	if later, _ := st.Events(a.ID, 1); len(later) != 1 {
		t.Fatalf("events after 1: %+v", later)
	}
	ts, _ := st.Threads("", "", 0)
	if len(ts) != 2 || ts[0].ID != "thread-2" {
		t.Fatalf("threads newest first: %+v", ts)
	}
	if ts, _ := st.Threads("w", "", 0); len(ts) != 1 {
		t.Fatal("filter by workflow")
	}
	if _, err := st.Thread("thread-9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown thread: %v", err)
	}
}
