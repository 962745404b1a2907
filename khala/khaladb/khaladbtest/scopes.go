package khaladbtest

import (
	"crypto/sha256"
	"errors"
	"slices"
	"testing"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// ScopesAndRevoke: an agent gets its enrollment token's scopes (none for
// a token without: the legacy set), a person keeps theirs, and a revoked
// agent's token is refused at once though it was just looked up (cached).
func ScopesAndRevoke(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	scoped, legacy := sha256.Sum256([]byte("scoped")), sha256.Sum256([]byte("legacy"))
	if err := s.AddEnrollToken(ctx, khaladb.EnrollToken{Hash: scoped, Uses: 1, CreatedAt: Epoch, Scopes: []string{"claim", "start"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEnrollToken(ctx, khaladb.EnrollToken{Hash: legacy, Uses: 1, CreatedAt: Epoch}); err != nil {
		t.Fatal(err)
	}
	a := khaladb.Agent{Name: "a", Token: sha256.Sum256([]byte("a")), EnrolledAt: Epoch}
	old := khaladb.Agent{Name: "old", Token: sha256.Sum256([]byte("old")), EnrolledAt: Epoch}
	if err := s.Enroll(ctx, scoped, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Enroll(ctx, legacy, old); err != nil {
		t.Fatal(err)
	}
	got, err := s.AgentByToken(ctx, a.Token)
	if err != nil || !slices.Equal(got.Scopes, []string{"claim", "start"}) {
		t.Fatalf("agent a: %+v %v, want scopes claim,start", got, err)
	}
	if got, err := s.AgentByToken(ctx, old.Token); err != nil || got.Scopes != nil {
		t.Fatalf("a legacy agent: %+v %v, want no scopes", got, err)
	}
	list, err := s.Agents(ctx)
	if err != nil || len(list) != 2 || !slices.Equal(list[0].Scopes, []string{"claim", "start"}) || list[1].Scopes != nil {
		t.Fatalf("agents: %+v %v", list, err)
	}
	p := khaladb.Person{Name: "carol", Token: sha256.Sum256([]byte("carol")), AddedAt: Epoch, Scopes: []string{"cancel"}}
	if err := s.AddPerson(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := s.PersonByToken(ctx, p.Token); err != nil || !slices.Equal(got.Scopes, []string{"cancel"}) {
		t.Fatalf("person: %+v %v", got, err)
	}
	if err := s.RevokeAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AgentByToken(ctx, a.Token); !errors.Is(err, khaladb.ErrUnauthorized) {
		t.Fatalf("a revoked agent's token: %v, want ErrUnauthorized", err)
	}
	if err := s.RevokeAgent(ctx, "a"); !errors.Is(err, khaladb.ErrNotFound) {
		t.Fatalf("revoking twice: %v, want ErrNotFound", err)
	}
	if list, _ := s.Agents(ctx); len(list) != 1 || list[0].Name != "old" {
		t.Fatalf("agents after the revoke: %+v", list)
	}
}

// WorkflowOwner: the first publisher owns a workflow; another publishing
// with an owner is refused and writes nothing; publishing without one
// (the admin) keeps the owner.
func WorkflowOwner(t *testing.T, open Opener) {
	s := open(t)
	ctx := t.Context()
	put := func(by, owner, hash string) error {
		_, err := s.PutWorkflow(ctx, khaladb.WorkflowRecord{Name: "wf", SourceHash: hash, UpdatedAt: Epoch, UpdatedBy: by, Owner: owner}, []byte(hash))
		return err
	}
	if err := put("a", "a", "h1"); err != nil {
		t.Fatal(err)
	}
	if err := put("b", "b", "h2"); !errors.Is(err, khaladb.ErrNotOwner) {
		t.Fatalf("b over a's: %v, want ErrNotOwner", err)
	}
	if w, _ := s.Workflow(ctx, "wf"); w.SourceHash != "h1" || w.OwnedBy() != "a" {
		t.Fatalf("after b's refused publish: %+v", w)
	}
	if err := put("admin", "", "h3"); err != nil {
		t.Fatal(err)
	}
	if w, _ := s.Workflow(ctx, "wf"); w.SourceHash != "h3" || w.UpdatedBy != "admin" || w.OwnedBy() != "a" {
		t.Fatalf("after the admin's publish: %+v", w)
	}
	if err := put("a", "a", "h4"); err != nil {
		t.Fatalf("the owner after the admin: %v", err)
	}
}
