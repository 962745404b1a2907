package khaladbtest

import (
	"crypto/sha256"
	"slices"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Agents lists the enrolled agents by name with the turns leased to each
// (claimed ones only, in thread and step order) and when each was last
// seen: SawAgents keeps the later of the stored and the given time, and
// skips names nobody enrolled.
func Agents(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	enroll := sha256.Sum256([]byte("enroll"))
	if err := s.AddEnrollToken(ctx, khaladb.EnrollToken{Hash: enroll, Uses: 2, CreatedAt: Epoch}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"w2", "w1"} {
		a := khaladb.Agent{Name: name, Token: sha256.Sum256([]byte(name)), EnrolledAt: Epoch.Add(time.Duration(i) * time.Second)}
		if err := s.Enroll(ctx, enroll, a); err != nil {
			t.Fatalf("enroll %s: %v", name, err)
		}
	}
	v1 := StartThread(t, s, "wf", Epoch, TurnSpec{Role: "a"}, TurnSpec{Role: "b"})
	v2 := StartThread(t, s, "wf", Epoch, TurnSpec{Role: "a"})
	held := ClaimAll(t, s, "w1", Epoch)
	if len(held) != 3 {
		t.Fatalf("claimed %d turns, want 3", len(held))
	}
	for _, tk := range held {
		if tk.ID == khaladb.TurnID(v1.Thread.ID, 2) {
			Answer(t, s, tk, "done", Epoch) // answered: no longer held
		}
	}
	seen := Epoch.Add(time.Minute)
	if err := s.SawAgents(ctx, map[string]time.Time{"w1": seen, "nobody": seen}); err != nil {
		t.Fatalf("saw agents: %v", err)
	}
	if err := s.SawAgents(ctx, map[string]time.Time{"w1": Epoch}); err != nil { // an older time, from another replica
		t.Fatalf("saw agents: %v", err)
	}
	got, err := s.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"w1", "w2"}) {
		t.Fatalf("agents %v, want w1, w2 (the unknown name not added)", names)
	}
	w1, w2 := got[0], got[1]
	wantHeld := []string{khaladb.TurnID(v1.Thread.ID, 1), khaladb.TurnID(v2.Thread.ID, 1)}
	if !w1.EnrolledAt.Equal(Epoch.Add(time.Second)) || !w1.LastSeen.Equal(seen) || !slices.Equal(w1.Held, wantHeld) {
		t.Errorf("w1: %+v; want enrolled %s, seen %s, holding %v", w1, Epoch.Add(time.Second), seen, wantHeld)
	}
	if !w2.EnrolledAt.Equal(Epoch) || !w2.LastSeen.IsZero() || w2.Held != nil {
		t.Errorf("w2: %+v; want enrolled %s, never seen, holding nothing", w2, Epoch)
	}
}
