package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "nerve.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// thread creates a running thread, a child of parent (at step, 0 for one
// an agent started) when parent is set.
func thread(t *testing.T, st *Store, parent *workflow.Thread, step int) *workflow.Thread {
	t.Helper()
	th := &workflow.Thread{Workflow: "w", Status: workflow.StatusRunning}
	if parent != nil {
		th.Parent = &workflow.Parent{Ref: "w#" + parent.ID, Thread: parent.ID, Step: step}
	}
	if err := st.CreateThread(th); err != nil {
		t.Fatal(err)
	}
	return th
}

// spend commits one answer of th spending tokens, ending th when end.
func spend(t *testing.T, st *Store, th *workflow.Thread, tokens int64, end bool) {
	t.Helper()
	m := workflow.Message{Step: th.Step + 1, Role: "r", Usage: &usage.Usage{InputTokens: usage.Int(tokens), CostUSD: usage.Float(float64(tokens) / 100)}}
	th.Step++
	th.Usage.Add(m.Usage)
	if end {
		th.Status = workflow.StatusCompleted
	}
	if err := st.Commit(workflow.Update{Thread: th, Messages: []workflow.Message{m}}); err != nil {
		t.Fatal(err)
	}
}

func tokensOf(t *testing.T, st *Store, id string) int64 {
	t.Helper()
	th, err := st.Thread(id)
	if err != nil {
		t.Fatal(err)
	}
	return th.Usage.Tokens()
}

func TestAgentChildSpendCountsInRunningParent(t *testing.T) {
	st := openTemp(t)
	p := thread(t, st, nil, 0)
	spend(t, st, p, 5, false)
	c := thread(t, st, p, 0)
	spend(t, st, c, 100, false)
	if late, _ := st.ChildSpend(p.ID); late.Messages != 0 {
		t.Fatalf("a running child's spend reached its parent: %+v", late)
	}
	spend(t, st, c, 20, true)
	if late, _ := st.ChildSpend(p.ID); late.Tokens() != 120 || late.Messages != 2 || *late.CostUSD != 1.2 {
		t.Fatalf("the parent's uncounted spend after its child ended: %+v", late)
	}
	if got := tokensOf(t, st, p.ID); got != 5 {
		t.Fatalf("the running parent's record changed under its engine: %d tokens", got)
	}
	// Stored again ended (an event, a cancel racing the end): not again.
	if err := st.Commit(workflow.Update{Thread: c}); err != nil {
		t.Fatal(err)
	}
	spend(t, st, p, 5, false)
	if p.Usage.Tokens() != 130 || tokensOf(t, st, p.ID) != 130 || p.Usage.Messages != 4 {
		t.Fatalf("the parent's commit counted %d in memory, %d on disk; want 130", p.Usage.Tokens(), tokensOf(t, st, p.ID))
	}
	if late, _ := st.ChildSpend(p.ID); late.Messages != 0 {
		t.Fatalf("counted and still left: %+v", late)
	}
	spend(t, st, p, 5, true)
	if got := tokensOf(t, st, p.ID); got != 135 {
		t.Fatalf("counted twice: %d", got)
	}
}

// A child that ends after its parent did is written into the parent's
// record, and from an agent's child on up to a running ancestor.
func TestAgentChildSpendAfterItsParentEnded(t *testing.T) {
	st := openTemp(t)
	g := thread(t, st, nil, 0)
	p := thread(t, st, g, 0)
	c := thread(t, st, p, 0)
	spend(t, st, p, 10, true)
	spend(t, st, c, 7, true)
	if got := tokensOf(t, st, p.ID); got != 17 {
		t.Fatalf("the ended parent counts %d, want 17", got)
	}
	if late, _ := st.ChildSpend(g.ID); late.Tokens() != 17 {
		t.Fatalf("the running grandparent is left %+v, want its child's 10 and the grandchild's 7", late)
	}
}

// A moderator's child reaches its parent through the step that waited
// for it (Message.ChildUsage), never here.
func TestModeratorChildSpendIsNotPassedUp(t *testing.T) {
	st := openTemp(t)
	p := thread(t, st, nil, 0)
	c := thread(t, st, p, 1)
	spend(t, st, c, 50, true)
	if late, _ := st.ChildSpend(p.ID); late.Messages != 0 {
		t.Fatalf("a moderator's child passed up %+v", late)
	}
}
