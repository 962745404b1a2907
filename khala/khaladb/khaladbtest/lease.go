package khaladbtest

import (
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// HeartbeatWrites: an agent heartbeating every third of its lease moves
// the stored lease at most once per lease period, is never left with less
// than a lease from any heartbeat, and once it stops, its turn is due
// more than one and at most two leases after its last heartbeat.
func HeartbeatWrites(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	const lease = 30 * time.Second
	StartThread(t, s, "fleet", Epoch, TurnSpec{Role: "a", Lease: lease})
	turns := ClaimAll(t, s, "a", Epoch)
	if len(turns) != 1 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	tk := turns[0]
	const beats = 90 // 30 leases
	writes, rev := 0, tk.Rev
	var last time.Time
	for i := 1; i <= beats; i++ {
		last = Epoch.Add(time.Duration(i) * lease / 3)
		hb, err := s.Heartbeat(ctx, tk.ID, tk.Claim, tk.Agent, last)
		if err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		if hb.LeaseExpires.Before(last.Add(lease)) {
			t.Fatalf("heartbeat %d at %s: lease until %s, less than a lease", i, last, hb.LeaseExpires)
		}
		if hb.Rev != rev {
			writes, rev = writes+1, hb.Rev
		}
	}
	if periods := beats / 3; writes > periods {
		t.Errorf("%d lease writes for %d heartbeats over %d lease periods; want at most one a period", writes, beats, periods)
	}
	stored, err := s.Turn(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if at := stored.LeaseExpires; !at.After(last.Add(lease)) || at.After(last.Add(2*lease)) {
		t.Errorf("stored expiry %s is %s after the last heartbeat; want more than one lease and at most two", at, at.Sub(last))
	}
	due, _, err := s.Due(ctx, stored.LeaseExpires.Add(-time.Millisecond), 10)
	if err != nil || len(due) != 0 {
		t.Errorf("due before the stored expiry: %+v, %v", due, err)
	}
	due, _, err = s.Due(ctx, stored.LeaseExpires, 10)
	if err != nil || len(due) != 1 || due[0].Turn != tk.ID || due[0].Kind != khaladb.DueExpired {
		t.Errorf("due at the stored expiry: %+v, %v", due, err)
	}
	t.Logf("%d lease writes for %d heartbeats", writes, beats)
}

// ClaimPriority: claims take higher priority first, then oldest first,
// with filters; a turn given back keeps its priority and its place.
func ClaimPriority(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	var ids []string
	for i, p := range []int{0, 5, -3, 5, 0, 100, -100} {
		v := StartThread(t, s, "w", Epoch.Add(time.Duration(i)*time.Second), TurnSpec{Role: "r", Priority: p})
		ids = append(ids, khaladb.TurnID(v.Thread.ID, 1))
	}
	StartThread(t, s, "other", Epoch.Add(time.Minute), TurnSpec{Role: "r", Priority: 50})
	now := Epoch.Add(time.Hour)
	claim := func(max int, wfs ...string) []khaladb.Turn {
		t.Helper()
		got, err := s.Claim(ctx, khaladb.ClaimQuery{Agent: "a", Max: max, Workflows: wfs, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	idsOf := func(ts []khaladb.Turn) []string {
		var out []string
		for _, tk := range ts {
			out = append(out, tk.ID)
		}
		return out
	}
	first := claim(2, "w")
	if want := []string{ids[5], ids[1]}; !slices.Equal(idsOf(first), want) {
		t.Fatalf("first claim: %v, want %v (priority 100, then the older 5)", idsOf(first), want)
	}
	if first[0].Priority != 100 || first[1].Priority != 5 {
		t.Errorf("claimed turns' priorities %d, %d; want 100, 5", first[0].Priority, first[1].Priority)
	}
	// The priority-5 turn goes back: it is ahead of the other 5 again.
	back := first[1]
	err := s.UpdateThread(ctx, back.Thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		tk := *v.Turn(back.ID)
		tk.State, tk.Claim, tk.Agent, tk.QueuedAt, tk.ClaimedAt, tk.LeaseExpires = khaladb.TurnQueued, "", "", now, time.Time{}, time.Time{}
		return &khaladb.ThreadChange{Thread: v.Thread, Turns: []khaladb.Turn{tk}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rest := claim(10, "w")
	if want := []string{ids[1], ids[3], ids[0], ids[4], ids[2], ids[6]}; !slices.Equal(idsOf(rest), want) {
		t.Errorf("the rest: %v, want %v", idsOf(rest), want)
	}
	if got := claim(1); len(got) != 1 || got[0].Workflow != "other" || got[0].Priority != 50 {
		t.Errorf("last claim: %+v", got)
	}
}
