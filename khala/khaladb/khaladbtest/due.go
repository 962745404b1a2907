package khaladbtest

import (
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// DueTurns: Due reports turns whose lease expired (with the lease) and
// queued turns whose idle time passed, and the earliest deadline still
// ahead; past its limit it says more is due now. A claimed turn is never
// idle, and an idle turn whose idle was raised (IdleAt cleared) is not
// reported again.
func DueTurns(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	v := StartThread(t, s, "due", Epoch, TurnSpec{Role: "waits", Lease: time.Minute, Idle: 30 * time.Second},
		TurnSpec{Role: "works", Lease: time.Minute, Idle: 35 * time.Second})
	idle, work := v.Turns[0], v.Turns[1]
	due := func(at time.Duration, limit int) ([]khaladb.DueTurn, time.Duration) {
		t.Helper()
		now := Epoch.Add(at)
		out, next, err := s.Due(ctx, now, limit)
		if err != nil {
			t.Fatalf("due at +%s: %v", at, err)
		}
		slices.SortFunc(out, func(a, b khaladb.DueTurn) int { return cmpStrings(a.Kind+a.Turn, b.Kind+b.Turn) })
		if next.IsZero() {
			return out, -1
		}
		return out, next.Sub(Epoch)
	}
	check := func(what string, at time.Duration, limit int, want []khaladb.DueTurn, wantNext time.Duration) {
		t.Helper()
		got, next := due(at, limit)
		if !slices.Equal(got, want) || next != wantNext {
			t.Errorf("%s (at +%s): due %+v, next +%s; want %+v, next +%s", what, at, got, next, want, wantNext)
		}
	}
	check("nothing yet", 10*time.Second, 10, nil, 30*time.Second)
	check("the first idle", 31*time.Second, 10, []khaladb.DueTurn{{Kind: khaladb.DueIdle, Turn: idle.ID, Thread: v.Thread.ID}}, 35*time.Second)

	claimed, err := s.Claim(ctx, khaladb.ClaimQuery{Agent: "a", Max: 1, Roles: []string{"works"}, Now: Epoch.Add(32 * time.Second)})
	if err != nil || len(claimed) != 1 || claimed[0].ID != work.ID {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	lease := claimed[0]
	check("claimed, so not idle", 40*time.Second, 10, []khaladb.DueTurn{{Kind: khaladb.DueIdle, Turn: idle.ID, Thread: v.Thread.ID}}, 92*time.Second)

	// The sweeper raises idle once: it clears IdleAt.
	err = s.UpdateThread(ctx, v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		tk := *v.Turn(idle.ID)
		tk.IdleAt = time.Time{}
		return &khaladb.ThreadChange{Thread: v.Thread, Turns: []khaladb.Turn{tk}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("idle raised", 40*time.Second, 10, nil, 92*time.Second)
	check("the lease ran out", 93*time.Second, 10,
		[]khaladb.DueTurn{{Kind: khaladb.DueExpired, Turn: lease.ID, Thread: v.Thread.ID, Claim: lease.Claim}}, -1)

	// Past the limit, more is due now.
	for range 3 {
		StartThread(t, s, "due", Epoch, TurnSpec{Role: "r", Idle: time.Second})
	}
	if got, next := due(93*time.Second, 2); len(got) != 2 || next != 93*time.Second {
		t.Errorf("limit 2 of 4 due: %d due, next +%s; want 2, next now", len(got), next)
	}
	if got, _ := due(93*time.Second, 10); len(got) != 4 {
		t.Errorf("limit 10 of 4 due: %+v", got)
	}
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
