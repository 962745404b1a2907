package khaladbtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Workspace: a thread's workspace and its messages' commit and changes
// are stored and read back as written, on every path (a thread's first
// write, an answer made from a claim's view, a read, a listing), and the
// head an answer moves is the head read back.
func Workspace(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	base, head := strings.Repeat("a", 40), strings.Repeat("b", 40)
	id, err := s.NextThreadID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := &workflow.Workspace{Repo: "https://git.example.com/app.git", Base: base, Branch: workflow.DefaultBranch("ws", id), Head: base}
	c := &khaladb.ThreadChange{Thread: khaladb.Thread{
		Thread: workflow.Thread{ID: id, Workflow: "ws", Status: workflow.StatusRunning, Input: map[string]any{},
			Workspace: ws, Step: 2, CreatedAt: Epoch, UpdatedAt: Epoch,
			Pending: []workflow.Turn{{Step: 1, Role: "a"}, {Step: 2, Role: "a"}}},
		SourceHash: "0000",
	}}
	for step := 1; step <= 2; step++ {
		c.Turns = append(c.Turns, khaladb.Turn{ID: khaladb.TurnID(id, step), Thread: id, Workflow: "ws", Step: step, Role: "a",
			Prompt: "p", State: khaladb.TurnQueued, Attempt: 1, MaxAttempts: 3, Lease: time.Minute, FirstQueued: Epoch, QueuedAt: Epoch})
	}
	if err := s.CreateThread(ctx, c); err != nil {
		t.Fatal(err)
	}
	v, err := s.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Thread.Workspace == nil || *v.Thread.Workspace != *ws {
		t.Fatalf("workspace read back %+v, want %+v", v.Thread.Workspace, ws)
	}
	turns := ClaimAll(t, s, "a", Epoch)
	if len(turns) != 2 {
		t.Fatalf("claimed %d turns, want 2", len(turns))
	}
	for _, tk := range turns {
		if h := tk.Head; h != nil && (h.Workspace == nil || *h.Workspace != *ws || h.Round != nil) {
			t.Fatalf("turn %s claimed with head %+v, want workspace %+v and no round", tk.ID, h, ws)
		}
	}
	// Step 1 answers with a commit: the head moves in the same change.
	// Step 2 answers without one: its message is stored as before.
	answer := func(tk khaladb.Turn, commit string, ch *workflow.Changes) {
		t.Helper()
		err := s.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			c := AnswerChange(v, tk.ID, tk.Claim, "done", Epoch)
			if c == nil {
				return nil, khaladb.ErrClaimLost
			}
			c.Messages[0].Commit, c.Messages[0].Changes = commit, ch
			if commit != "" {
				moved := *c.Thread.Workspace
				moved.Head = commit
				c.Thread.Workspace = &moved
			}
			return c, nil
		})
		if err != nil {
			t.Fatalf("answer %s: %v", tk.ID, err)
		}
	}
	answer(turns[0], head, &workflow.Changes{Files: 2, Insertions: 10, Deletions: 3})
	answer(turns[1], "", nil)
	v, err = s.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Thread.Workspace == nil || v.Thread.Workspace.Head != head || v.Thread.Workspace.Base != base {
		t.Fatalf("head read back %+v, want %s", v.Thread.Workspace, head)
	}
	if len(v.Messages) != 2 {
		t.Fatalf("%d messages, want 2", len(v.Messages))
	}
	m1, m2 := v.Messages[0], v.Messages[1]
	if m1.Commit != head || m1.Changes == nil || *m1.Changes != (workflow.Changes{Files: 2, Insertions: 10, Deletions: 3}) {
		t.Fatalf("message 1 read back %+v", m1)
	}
	if m2.Commit != "" || m2.Changes != nil {
		t.Fatalf("message 2 has no commit, read back %+v", m2)
	}
	ts, err := s.Threads(ctx, khaladb.ThreadQuery{Workflow: "ws"})
	if err != nil || len(ts) != 1 || ts[0].Workspace == nil || ts[0].Workspace.Head != head {
		t.Fatalf("listing: %v %+v", err, ts)
	}
}
