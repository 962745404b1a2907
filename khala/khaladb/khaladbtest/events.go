package khaladbtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Events: a thread's events come back in the order they were committed,
// numbered upward, with what they said; Events(after) is exactly the tail
// after that number and limit bounds it, whatever step each event is of
// (parallel turns answered out of order included).
func Events(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	v := StartThread(t, s, "ev", Epoch, TurnSpec{Role: "a"}, TurnSpec{Role: "b"})
	id := v.Thread.ID
	var all []workflow.Event
	check := func(when string, wantTypes ...string) {
		t.Helper()
		evs, err := s.Events(ctx, id, 0, 0)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !slices.Equal(eventTypes(evs), wantTypes) {
			t.Fatalf("%s: events %v, want %v", when, eventTypes(evs), wantTypes)
		}
		for i, e := range evs {
			if e.Thread != id || (i > 0 && e.Seq <= evs[i-1].Seq) || e.Seq == 0 {
				t.Fatalf("%s: event %d is %+v after %+v", when, i, e, evs[max(i-1, 0)])
			}
		}
		for i := range evs {
			tail, err := s.Events(ctx, id, evs[i].Seq, 0)
			if err != nil || !slices.EqualFunc(tail, evs[i+1:], sameEvent) {
				t.Fatalf("%s: events after %d: %v, %v; want %v", when, evs[i].Seq, eventTypes(tail), err, eventTypes(evs[i+1:]))
			}
		}
		if head, err := s.Events(ctx, id, 0, 2); err != nil || !slices.EqualFunc(head, evs[:min(2, len(evs))], sameEvent) {
			t.Fatalf("%s: limit 2: %v, %v", when, eventTypes(head), err)
		}
		all = evs
	}
	const started, queued, claimed, answered, ended = workflow.EventThreadStarted, "turn.queued",
		workflow.EventTurnStarted, workflow.EventTurnAnswered, workflow.EventThreadEnded
	check("a new thread", started, queued, queued)

	turns := ClaimAll(t, s, "agent", Epoch.Add(time.Second))
	if len(turns) != 2 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	check("claimed", started, queued, queued, claimed, claimed)
	if e := all[3]; e.Turn != turns[0].ID || e.Claim != turns[0].Claim || e.Agent != "agent" || e.Step != 1 ||
		e.Attempt != 1 || !e.At.Equal(Epoch.Add(time.Second)) {
		t.Errorf("turn.started as read back: %+v", e)
	}
	// Step 2 answers first, then step 1.
	Answer(t, s, turns[1], "B", Epoch.Add(2*time.Second))
	check("step 2 answered", started, queued, queued, claimed, claimed, answered)
	Answer(t, s, turns[0], "A", Epoch.Add(3*time.Second))
	check("step 1 answered", started, queued, queued, claimed, claimed, answered, answered, ended)
	if all[5].Step != 2 || all[6].Step != 1 || all[7].Status != workflow.StatusCompleted {
		t.Errorf("answers as read back: %+v, %+v, %+v", all[5], all[6], all[7])
	}
	if evs, err := s.Events(ctx, id, all[len(all)-1].Seq, 0); err != nil || len(evs) != 0 {
		t.Errorf("events after the last: %v, %v", eventTypes(evs), err)
	}
	if evs, err := s.Events(ctx, "thread-999999", 0, 0); len(evs) != 0 || err != nil && !errors.Is(err, khaladb.ErrNotFound) {
		t.Errorf("events of no thread: %v, %v", eventTypes(evs), err)
	}
	if _, err := s.Events(ctx, "nope", 0, 0); !errors.Is(err, khaladb.ErrNotFound) {
		t.Errorf("events of a malformed id: %v, want ErrNotFound", err)
	}
}

func sameEvent(a, b workflow.Event) bool {
	return a.Seq == b.Seq && a.Type == b.Type && a.Turn == b.Turn && a.Step == b.Step
}

// Wakeups: a change through a store closes the channels Changed gave its
// waiters before it: the queue's when a turn is queued, the thread's when
// it has events, the webhooks' when a delivery is added; and the outbox
// hands a delivery out once per lease until it is finished.
func Wakeups(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	woken := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: no wake-up", what)
		}
	}
	queue := s.Changed(khaladb.TopicQueue)
	v := StartThread(t, s, "wake", Epoch, TurnSpec{Role: "a"})
	woken("a turn queued", queue)

	thread, hooks := s.Changed(khaladb.ThreadTopic(v.Thread.ID)), s.Changed(khaladb.TopicWebhooks)
	hook := khaladb.Webhook{URL: "http://127.0.0.1:1/hook", NextAt: Epoch, Created: Epoch,
		Payload: khaladb.WebhookPayload{Event: "turn.idle", Thread: v.Thread.ID, Workflow: "wake", Status: workflow.StatusRunning}}
	err := s.UpdateThread(ctx, v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		return &khaladb.ThreadChange{Thread: v.Thread, Webhooks: []khaladb.Webhook{hook},
			Events: []workflow.Event{{At: Epoch, Type: workflow.EventDetection, Thread: v.Thread.ID, Message: "look"}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	woken("an event", thread)
	woken("a webhook", hooks)

	got, next, err := s.ClaimWebhooks(ctx, Epoch.Add(time.Second), time.Minute, 10)
	if err != nil || len(got) != 1 || got[0].Payload != hook.Payload || got[0].URL != hook.URL {
		t.Fatalf("claim webhooks: %+v, %v", got, err)
	}
	if again, _, err := s.ClaimWebhooks(ctx, Epoch.Add(2*time.Second), time.Minute, 10); err != nil || len(again) != 0 {
		t.Errorf("a leased delivery handed out again: %+v, %v", again, err)
	}
	_ = next
	if err := s.FinishWebhook(ctx, got[0].ID, 1, Epoch.Add(5*time.Second), "refused"); err != nil {
		t.Fatal(err)
	}
	retry, _, err := s.ClaimWebhooks(ctx, Epoch.Add(6*time.Second), time.Minute, 10)
	if err != nil || len(retry) != 1 || retry[0].Attempts != 1 || retry[0].LastErr != "refused" {
		t.Fatalf("the retry: %+v, %v", retry, err)
	}
	if err := s.FinishWebhook(ctx, retry[0].ID, 2, time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	if none, _, err := s.ClaimWebhooks(ctx, Epoch.Add(time.Hour), time.Minute, 10); err != nil || len(none) != 0 {
		t.Errorf("a finished delivery handed out: %+v, %v", none, err)
	}
}
