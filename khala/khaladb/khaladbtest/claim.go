package khaladbtest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// ClaimExactlyOnce: agents claiming at once, each through its own calls
// until all are taken, get every queued turn exactly once between them, each leased to its
// claimant with a turn.started event; then nothing is left to claim.
func ClaimExactlyOnce(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	const threads, perThread, agents = 12, 3, 8
	want := map[string]bool{}
	for range threads {
		v := StartThread(t, s, "race", Epoch, TurnSpec{Role: "a"}, TurnSpec{Role: "b"}, TurnSpec{Role: "c"})
		for _, tk := range v.Turns {
			want[tk.ID] = true
		}
	}
	now := Epoch.Add(time.Second)
	var (
		mu  sync.Mutex
		got = map[string][]khaladb.Turn{}
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	deadline := time.Now().Add(20 * time.Second)
	for i := range agents {
		wg.Go(func() {
			agent := fmt.Sprintf("agent-%d", i)
			<-start
			// A claim may find fewer turns than are queued (PostgreSQL skips
			// the rows another claim holds): claim until all are taken.
			for {
				mu.Lock()
				all := len(got) == len(want)
				mu.Unlock()
				if all || time.Now().After(deadline) {
					return
				}
				turns, err := s.Claim(ctx, khaladb.ClaimQuery{Agent: agent, Max: 1 + i%3, Now: now})
				if err != nil {
					t.Errorf("%s: claim: %v", agent, err)
					return
				}
				mu.Lock()
				for _, tk := range turns {
					got[tk.ID] = append(got[tk.ID], tk)
				}
				mu.Unlock()
				if len(turns) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(got) != threads*perThread {
		t.Fatalf("claimed %d distinct turns, want %d", len(got), threads*perThread)
	}
	for id, claims := range got {
		if !want[id] {
			t.Errorf("claimed %s, which was never queued", id)
		}
		if len(claims) != 1 {
			t.Errorf("%s claimed %d times", id, len(claims))
			continue
		}
		tk := claims[0]
		if tk.State != khaladb.TurnClaimed || tk.Claim == "" || tk.Agent == "" ||
			!tk.ClaimedAt.Equal(now) || !tk.LeaseExpires.Equal(now.Add(tk.Lease)) {
			t.Errorf("%s as claimed: %+v", id, tk)
		}
		stored, err := s.Turn(ctx, id)
		if err != nil || stored.Claim != tk.Claim || stored.Agent != tk.Agent || stored.State != khaladb.TurnClaimed {
			t.Errorf("%s as stored: %+v, %v; claimed as %+v", id, stored, err, tk)
		}
		evs, err := s.Events(ctx, tk.Thread, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Type == workflow.EventTurnStarted && e.Turn == id {
				n++
				if e.Claim != tk.Claim || e.Agent != tk.Agent || e.Step != tk.Step {
					t.Errorf("%s: turn.started %+v for claim %+v", id, e, tk)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d turn.started events, want 1", id, n)
		}
	}
	if more := ClaimAll(t, s, "late", now); len(more) != 0 {
		t.Errorf("claimed %d more after the queue was drained", len(more))
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Queued != 0 || st.Claimed != threads*perThread || st.Running != threads {
		t.Errorf("stats %+v, %v", st, err)
	}
}

// ClaimOrderAndFilters: a claim takes the oldest queued turns first, up to
// its max, and only of the workflows and roles it names.
func ClaimOrderAndFilters(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	var ids []string
	for i, wf := range []string{"w1", "w2", "w1", "w2"} {
		v := StartThread(t, s, wf, Epoch.Add(time.Duration(i)*time.Second), TurnSpec{Role: "writer"}, TurnSpec{Role: "reviewer"})
		ids = append(ids, v.Thread.ID)
	}
	now := Epoch.Add(time.Minute)
	claim := func(q khaladb.ClaimQuery) []string {
		t.Helper()
		q.Now = now
		turns, err := s.Claim(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range turns {
			out = append(out, tk.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    khaladb.ClaimQuery
		want []string
	}{
		{"role and workflow", khaladb.ClaimQuery{Agent: "a", Max: 5, Workflows: []string{"w2"}, Roles: []string{"reviewer"}},
			[]string{khaladb.TurnID(ids[1], 2), khaladb.TurnID(ids[3], 2)}},
		{"oldest first, up to max", khaladb.ClaimQuery{Agent: "a", Max: 3},
			[]string{khaladb.TurnID(ids[0], 1), khaladb.TurnID(ids[0], 2), khaladb.TurnID(ids[1], 1)}},
		{"a workflow of several", khaladb.ClaimQuery{Agent: "a", Max: 5, Workflows: []string{"w9", "w1"}},
			[]string{khaladb.TurnID(ids[2], 1), khaladb.TurnID(ids[2], 2)}},
		{"a role nobody has", khaladb.ClaimQuery{Agent: "a", Max: 5, Roles: []string{"judge"}}, nil},
		{"the rest", khaladb.ClaimQuery{Agent: "a", Max: 5}, []string{khaladb.TurnID(ids[3], 1)}},
	} {
		if got := claim(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s: claimed %v, want %v", c.name, got, c.want)
		}
	}
}

// Heartbeat extends a lease only for its holder (the claim and the agent
// it was leased to) and only while it holds it; a turn whose thread ended
// comes back cancelled, its lease as it was.
func Heartbeat(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	v := StartThread(t, s, "hb", Epoch, TurnSpec{Role: "a", Lease: time.Minute}, TurnSpec{Role: "b", Lease: time.Minute})
	turns := ClaimAll(t, s, "a", Epoch)
	if len(turns) != 2 {
		t.Fatalf("claimed %d turns", len(turns))
	}
	tk := turns[0]
	later := Epoch.Add(30 * time.Second)
	// The stored expiry (a minute after the claim) would end within a
	// lease of the heartbeat: it is written, two leases ahead.
	hb, err := s.Heartbeat(ctx, tk.ID, tk.Claim, tk.Agent, later)
	if err != nil || !hb.LeaseExpires.Equal(later.Add(2*time.Minute)) || hb.Rev <= tk.Rev || hb.State != khaladb.TurnClaimed {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	// The next one finds it far enough ahead and writes nothing.
	again, err := s.Heartbeat(ctx, tk.ID, tk.Claim, tk.Agent, later.Add(20*time.Second))
	if err != nil || !again.LeaseExpires.Equal(hb.LeaseExpires) || again.Rev != hb.Rev || again.State != khaladb.TurnClaimed {
		t.Fatalf("heartbeat covered by the stored expiry: %+v, %v; want it unchanged at %s rev %d", again, err, hb.LeaseExpires, hb.Rev)
	}
	if _, err := s.Heartbeat(ctx, tk.ID, "not-the-claim", tk.Agent, later); !errorsIs(err, khaladb.ErrClaimLost) {
		t.Errorf("heartbeat with another claim: %v, want ErrClaimLost", err)
	}
	// The claim is in the trace for all to read: another agent's
	// heartbeat with it is refused, and moves nothing, even when the
	// lease would be written.
	if _, err := s.Heartbeat(ctx, tk.ID, tk.Claim, "not-"+tk.Agent, later.Add(100*time.Second)); !errorsIs(err, khaladb.ErrNotHolder) {
		t.Errorf("heartbeat by another agent: %v, want ErrNotHolder", err)
	}
	if st, err := s.Turn(ctx, tk.ID); err != nil || st.Rev != hb.Rev || !st.LeaseExpires.Equal(hb.LeaseExpires) {
		t.Errorf("after another agent's heartbeat: %+v, %v; want rev %d, expiry %s", st, err, hb.Rev, hb.LeaseExpires)
	}
	if _, err := s.Heartbeat(ctx, tk.ID, tk.Claim, tk.Agent, later.Add(3*time.Minute)); !errorsIs(err, khaladb.ErrClaimLost) {
		t.Errorf("heartbeat after the lease ran out: %v, want ErrClaimLost", err)
	}
	if _, err := s.Heartbeat(ctx, khaladb.TurnID(v.Thread.ID, 9), tk.Claim, tk.Agent, later); !errorsIs(err, khaladb.ErrNotFound) {
		t.Errorf("heartbeat of no turn: %v, want ErrNotFound", err)
	}
	// The thread ends: its open turns are cancelled, keeping their claims.
	err = s.UpdateThread(ctx, v.Thread.ID, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		c := &khaladb.ThreadChange{Thread: v.Thread}
		c.Thread.Status, c.Thread.Pending, c.Thread.EndedAt = workflow.StatusCancelled, nil, later
		for _, open := range v.Turns {
			open.State = khaladb.TurnCancelled
			c.Turns = append(c.Turns, open)
		}
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	other := turns[1]
	hb, err = s.Heartbeat(ctx, other.ID, other.Claim, other.Agent, later)
	if err != nil || hb.State != khaladb.TurnCancelled || !hb.LeaseExpires.Equal(other.LeaseExpires) {
		t.Errorf("heartbeat of a cancelled turn: %+v, %v; want it cancelled, lease %s", hb, err, other.LeaseExpires)
	}
	if _, err := s.Heartbeat(ctx, other.ID, other.Claim, "not-"+other.Agent, later); !errorsIs(err, khaladb.ErrNotHolder) {
		t.Errorf("heartbeat of a cancelled turn by another agent: %v, want ErrNotHolder", err)
	}
}
