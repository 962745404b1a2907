package khaladbtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// MergeTurn: the merge turn of a parallel round (khaladb.MergeRole) is
// claimed by a claim of its workflow whatever roles it names, is stored, leased,
// heartbeaten, expired and read back at its step (MergeStepBase and the
// round's last step) like any turn; the thread record keeps the round and
// the step errors its answer puts on stored messages, and the messages
// themselves are never rewritten.
func MergeTurn(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	base, one, two := strings.Repeat("a", 40), strings.Repeat("1", 40), strings.Repeat("2", 40)
	v := StartThread(t, s, "split", Epoch, TurnSpec{Role: "left"}, TurnSpec{Role: "right"})
	id := v.Thread.ID
	round := ClaimAll(t, s, "w", Epoch)
	if len(round) != 2 {
		t.Fatalf("claimed %d turns, want 2", len(round))
	}
	step := khaladb.MergeStepBase + 2
	mergeID := khaladb.TurnID(id, step)
	// Step 2 answers first; step 1's answer queues the merge turn instead
	// of ending the thread, with the round in the thread record.
	for i, tk := range []khaladb.Turn{round[1], round[0]} {
		commit := []string{two, one}[i]
		err := s.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			c := AnswerChange(v, tk.ID, tk.Claim, "did", Epoch)
			if c == nil {
				return nil, khaladb.ErrClaimLost
			}
			c.Messages[0].Commit = commit
			c.Thread.Status, c.Thread.EndedAt = workflow.StatusRunning, time.Time{}
			c.Events = c.Events[:1]
			c.Thread.Round = &khaladb.Round{From: base, First: 1, Last: 2}
			if len(c.Thread.Pending) == 0 {
				c.Thread.Round.Merging = true
				c.Thread.Pending = []workflow.Turn{{Step: step, Role: khaladb.MergeRole}}
				c.Turns = append(c.Turns, khaladb.Turn{ID: mergeID, Thread: id, Workflow: "split", Step: step,
					Role: khaladb.MergeRole, Prompt: `{"from":"` + base + `"}`, State: khaladb.TurnQueued,
					Attempt: 1, MaxAttempts: 3, Lease: time.Second, FirstQueued: Epoch, QueuedAt: Epoch})
			}
			return c, nil
		})
		if err != nil {
			t.Fatalf("answer %s: %v", tk.ID, err)
		}
	}
	got, err := s.Claim(ctx, khaladb.ClaimQuery{Agent: "w2", Max: 5, Workflows: []string{"other"}, Now: Epoch})
	if err != nil || len(got) != 0 {
		t.Fatalf("a claim of other workflows: %v %+v; want nothing", err, got)
	}
	got, err = s.Claim(ctx, khaladb.ClaimQuery{Agent: "w2", Max: 5, Workflows: []string{"split"}, Roles: []string{"nobody"}, Now: Epoch})
	if err != nil || len(got) != 1 || got[0].ID != mergeID || got[0].Role != khaladb.MergeRole || !strings.Contains(got[0].Prompt, base) {
		t.Fatalf("a filtered claim: %v %+v; want the merge turn %s", err, got, mergeID)
	}
	if _, err := s.Heartbeat(ctx, mergeID, got[0].Claim, got[0].Agent, Epoch); err != nil {
		t.Fatalf("heartbeat of the merge turn: %v", err)
	}
	due, _, err := s.Due(ctx, Epoch.Add(time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].Turn != mergeID || due[0].Kind != khaladb.DueExpired {
		t.Fatalf("due: %v %+v; want the merge turn's lease", err, due)
	}
	v, err = s.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r := v.Thread.Round; r == nil || *r != (khaladb.Round{From: base, First: 1, Last: 2, Merging: true}) {
		t.Fatalf("round read back %+v", r)
	}
	mt := v.Turn(mergeID)
	if mt == nil || mt.State != khaladb.TurnClaimed || mt.Agent != "w2" {
		t.Fatalf("the view's merge turn: %+v", mt)
	}
	// The merge's answer: no message; a conflict on step 2's.
	conflict := workflow.MessageError{Kind: "merge", Message: "a.txt"}
	err = s.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := &khaladb.ThreadChange{Thread: v.Thread}
		done := *v.Turn(mergeID)
		done.State = khaladb.TurnAnswered
		c.Turns = []khaladb.Turn{done}
		c.Thread.Round, c.Thread.Pending = nil, nil
		c.Thread.StepErrors = []khaladb.StepError{{Step: 2, Error: conflict}}
		c.Thread.Status, c.Thread.EndedAt = workflow.StatusCompleted, Epoch
		return c, nil
	})
	if err != nil {
		t.Fatalf("answer the merge turn: %v", err)
	}
	v, err = s.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Thread.Round != nil || len(v.Thread.StepErrors) != 1 || v.Thread.StepErrors[0] != (khaladb.StepError{Step: 2, Error: conflict}) {
		t.Fatalf("thread record read back: round %+v, step errors %+v", v.Thread.Round, v.Thread.StepErrors)
	}
	if len(v.Messages) != 2 || v.Messages[1].Error != nil || v.Messages[1].Commit != two {
		t.Fatalf("stored messages: %+v", v.Messages)
	}
	msgs := khaladb.WithStepErrors(&v.Thread, v.Messages)
	if msgs[1].Error == nil || *msgs[1].Error != conflict || msgs[0].Error != nil || v.Messages[1].Error != nil {
		t.Fatalf("messages with the step errors: %+v (stored: %+v)", msgs, v.Messages)
	}
	if tk, err := s.Turn(ctx, mergeID); err != nil || tk.State != khaladb.TurnAnswered || tk.Step != step {
		t.Fatalf("the merge turn read back: %v %+v", err, tk)
	}
}
