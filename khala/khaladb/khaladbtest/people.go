package khaladbtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// People: a person is added once (a second add of the name is
// ErrNameTaken), found by their token's hash only, listed by name, and
// once removed their token is refused at once; removing them again is
// ErrNotFound. An agent's token is not a person's, nor the reverse.
func People(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	alice, bob := sha256.Sum256([]byte("alice-token")), sha256.Sum256([]byte("bob-token"))
	for _, p := range []khaladb.Person{{Name: "bob", Token: bob, AddedAt: Epoch}, {Name: "alice", Token: alice, AddedAt: Epoch.Add(time.Second)}} {
		if err := s.AddPerson(ctx, p); err != nil {
			t.Fatalf("add %s: %v", p.Name, err)
		}
	}
	if err := s.AddPerson(ctx, khaladb.Person{Name: "alice", Token: sha256.Sum256([]byte("other")), AddedAt: Epoch}); !errors.Is(err, khaladb.ErrNameTaken) {
		t.Errorf("adding alice twice: %v, want ErrNameTaken", err)
	}
	p, err := s.PersonByToken(ctx, alice)
	if err != nil || p.Name != "alice" || !p.AddedAt.Equal(Epoch.Add(time.Second)) || !khaladb.SameHash(p.Token, alice) {
		t.Errorf("alice by token: %+v, %v", p, err)
	}
	if _, err := s.PersonByToken(ctx, sha256.Sum256([]byte("nobody"))); !errors.Is(err, khaladb.ErrUnauthorized) {
		t.Errorf("an unknown token: %v, want ErrUnauthorized", err)
	}
	agent := sha256.Sum256([]byte("agent-token"))
	if err := s.AddEnrollToken(ctx, khaladb.EnrollToken{Hash: sha256.Sum256([]byte("enroll")), Uses: 1, CreatedAt: Epoch}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enroll(ctx, sha256.Sum256([]byte("enroll")), khaladb.Agent{Name: "alice", Token: agent, EnrolledAt: Epoch}); err != nil {
		t.Fatalf("enroll an agent named like a person: %v", err)
	}
	if _, err := s.PersonByToken(ctx, agent); !errors.Is(err, khaladb.ErrUnauthorized) {
		t.Errorf("an agent's token as a person's: %v, want ErrUnauthorized", err)
	}
	if _, err := s.AgentByToken(ctx, alice); !errors.Is(err, khaladb.ErrUnauthorized) {
		t.Errorf("a person's token as an agent's: %v, want ErrUnauthorized", err)
	}
	ps, err := s.People(ctx)
	if err != nil || len(ps) != 2 || ps[0].Name != "alice" || ps[1].Name != "bob" {
		t.Errorf("people: %+v, %v; want alice, bob", ps, err)
	}
	if err := s.RemovePerson(ctx, "alice"); err != nil {
		t.Fatalf("remove alice: %v", err)
	}
	if _, err := s.PersonByToken(ctx, alice); !errors.Is(err, khaladb.ErrUnauthorized) {
		t.Errorf("a removed person's token: %v, want ErrUnauthorized at once", err)
	}
	if err := s.RemovePerson(ctx, "alice"); !errors.Is(err, khaladb.ErrNotFound) {
		t.Errorf("removing alice again: %v, want ErrNotFound", err)
	}
	if p, err := s.PersonByToken(ctx, bob); err != nil || p.Name != "bob" {
		t.Errorf("bob after alice left: %+v, %v", p, err)
	}
}

// PeopleAndChildTurns: a human turn (waiting) and a child turn are open
// turns of their thread, never claimed; the waiting one is listed by
// WaitingTurns and goes idle like a queued one; the child one is due for a
// check at its LeaseExpires and keeps its Child; the thread keeps its
// parent, depth and children. Answering the waiting turn takes it off the
// list.
func PeopleAndChildTurns(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	v := StartThread(t, s, "release", Epoch, TurnSpec{Role: "author"})
	id := v.Thread.ID
	err := s.UpdateThread(ctx, id, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := &khaladb.ThreadChange{Thread: v.Thread}
		c.Thread.Parent, c.Thread.Depth = &workflow.Parent{Ref: "top#thread-99", Thread: "thread-99", Step: 2}, 1
		c.Thread.Children = []khaladb.ChildLink{{Thread: "thread-77", Workflow: "review", Step: 3, Status: workflow.StatusRunning}}
		c.Thread.Step = 3
		c.Thread.Pending = append(slices.Clone(c.Thread.Pending), workflow.Turn{Step: 2, Role: "approver"},
			workflow.Turn{Step: 3, Role: "review", Workflow: "review"})
		c.Turns = []khaladb.Turn{
			{ID: khaladb.TurnID(id, 2), Thread: id, Workflow: "release", Step: 2, Role: "approver", Prompt: "approve?",
				State: khaladb.TurnWaiting, Attempt: 1, MaxAttempts: 1, Idle: time.Minute, FirstQueued: Epoch, QueuedAt: Epoch,
				IdleAt: Epoch.Add(time.Minute)},
			{ID: khaladb.TurnID(id, 3), Thread: id, Workflow: "release", Step: 3, Role: "review", Instruction: "child workflow review",
				State: khaladb.TurnChild, Attempt: 1, MaxAttempts: 1, FirstQueued: Epoch, QueuedAt: Epoch,
				LeaseExpires: Epoch.Add(2 * time.Minute), Child: "thread-77"},
		}
		return c, nil
	})
	if err != nil {
		t.Fatalf("queue a human and a child turn: %v", err)
	}
	claimed := ClaimAll(t, s, "agent", Epoch.Add(10*time.Minute))
	if len(claimed) != 1 || claimed[0].Role != "author" {
		t.Fatalf("claims took %+v; want only the author's turn (never a person's or a child's)", claimed)
	}
	got, err := s.Thread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	th := got.Thread
	if th.Parent == nil || th.Parent.Thread != "thread-99" || th.Parent.Step != 2 || th.Depth != 1 ||
		len(th.Children) != 1 || th.Children[0] != (khaladb.ChildLink{Thread: "thread-77", Workflow: "review", Step: 3, Status: workflow.StatusRunning}) {
		t.Errorf("thread's parent %+v, depth %d, children %+v", th.Parent, th.Depth, th.Children)
	}
	var states []string
	for _, tk := range got.Turns {
		states = append(states, tk.State)
	}
	if !slices.Equal(states, []string{khaladb.TurnClaimed, khaladb.TurnWaiting, khaladb.TurnChild}) || got.Turns[2].Child != "thread-77" {
		t.Errorf("open turns: %v (child %q); want claimed, waiting, child (thread-77)", states, got.Turns[2].Child)
	}
	waiting, err := s.WaitingTurns(ctx)
	if err != nil || len(waiting) != 1 || waiting[0].ID != khaladb.TurnID(id, 2) || waiting[0].Prompt != "approve?" {
		t.Fatalf("waiting turns: %+v, %v; want the approver's", waiting, err)
	}
	due, _, err := s.Due(ctx, Epoch.Add(3*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range due {
		if d.Kind != khaladb.DueExpired {
			kinds = append(kinds, d.Kind+" "+d.Turn)
		}
	}
	slices.Sort(kinds)
	if want := []string{"child " + khaladb.TurnID(id, 3), "idle " + khaladb.TurnID(id, 2)}; !slices.Equal(kinds, want) {
		t.Errorf("due at +3m: %v; want %v", kinds, want)
	}
	answerWaiting(t, s, id, khaladb.TurnID(id, 2), "alice")
	if waiting, err := s.WaitingTurns(ctx); err != nil || len(waiting) != 0 {
		t.Errorf("waiting turns after the answer: %+v, %v; want none", waiting, err)
	}
	tk, err := s.Turn(ctx, khaladb.TurnID(id, 2))
	if err != nil || tk.State != khaladb.TurnAnswered {
		t.Errorf("the answered turn: %+v, %v", tk, err)
	}
}

// answerWaiting records person's answer to the waiting turn.
func answerWaiting(t *testing.T, s khaladb.Storage, thread, turn, person string) {
	t.Helper()
	now := Epoch.Add(5 * time.Minute)
	err := s.UpdateThread(context.Background(), thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		tk := v.Turn(turn)
		if tk == nil || tk.State != khaladb.TurnWaiting {
			return nil, errors.New("not waiting")
		}
		c := &khaladb.ThreadChange{Thread: v.Thread}
		done := *tk
		done.State = khaladb.TurnAnswered
		c.Turns = []khaladb.Turn{done}
		c.Messages = []workflow.Message{{Step: tk.Step, Role: tk.Role, Agent: person, Content: "yes", At: now}}
		c.Thread.Pending = slices.DeleteFunc(slices.Clone(v.Thread.Pending), func(p workflow.Turn) bool { return p.Step == tk.Step })
		return c, nil
	})
	if err != nil {
		t.Fatalf("answer %s: %v", turn, err)
	}
}
