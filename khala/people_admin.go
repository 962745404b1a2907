package khala

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// People: `nerve khala user add|list|remove`, into any Storage (Users),
// into a bbolt file whoever holds it (UsersAt: directly, or through the
// running server's admin path as enroll-token does), or into PostgreSQL
// (UsersInPostgres).

// prefixPerson marks a person's token: it answers human turns and reads
// threads, and is never an agent's.
const prefixPerson = "khala_person_"

// User is a person as the admin commands show one; Token only when added.
type User struct {
	Name    string    `json:"name"`
	Token   string    `json:"token,omitempty"`
	AddedAt time.Time `json:"added_at"`
	// Scopes are the token's; absent: added before scopes (answer and
	// console, see DescribeScopes).
	Scopes []string `json:"scopes,omitempty"`
}

// Users manages the people of one Storage.
type Users struct {
	Store khaladb.Storage
	Now   func() time.Time
}

// Add creates a person and returns their token, shown this once. The
// token carries scopes (none given: DefaultPersonScopes).
func (u Users) Add(ctx context.Context, name string, scopes ...string) (User, error) {
	if err := workflow.CheckPersonName(name); err != nil {
		return User{}, badRequest("%v", err)
	}
	scopes, err := agentScopesCheck(scopes, PersonScopes)
	if err != nil {
		return User{}, err
	}
	tok, h := newToken(prefixPerson)
	p := khaladb.Person{Name: name, Token: h, AddedAt: u.Now().UTC(), Scopes: scopesOf(scopes, DefaultPersonScopes)}
	err = u.Store.AddPerson(ctx, p)
	if errors.Is(err, khaladb.ErrNameTaken) {
		return User{}, &apiError{http.StatusConflict, codeNameTaken, fmt.Sprintf("person %q already exists; remove them first to issue a new token", name)}
	}
	return User{Name: name, Token: tok, AddedAt: p.AddedAt, Scopes: p.Scopes}, err
}

// List returns the people by name.
func (u Users) List(ctx context.Context) ([]User, error) {
	ps, err := u.Store.People(ctx)
	out := make([]User, 0, len(ps))
	for _, p := range ps {
		out = append(out, User{Name: p.Name, AddedAt: p.AddedAt, Scopes: p.Scopes})
	}
	return out, err
}

// Remove deletes a person: their token stops working at once.
func (u Users) Remove(ctx context.Context, name string) error {
	err := u.Store.RemovePerson(ctx, name)
	if errors.Is(err, khaladb.ErrNotFound) {
		return notFound("no person %q", name)
	}
	return err
}

// UserRequest is one people-management request: Action add, list or remove.
type UserRequest struct {
	Action string   `json:"action"`
	Name   string   `json:"name,omitempty"`
	Scopes []string `json:"scopes,omitempty"` // add's
}

// do runs req against u.
func (u Users) do(ctx context.Context, req UserRequest) ([]User, error) {
	switch req.Action {
	case "add":
		p, err := u.Add(ctx, req.Name, req.Scopes...)
		return []User{p}, err
	case "list":
		return u.List(ctx)
	case "remove":
		return nil, u.Remove(ctx, req.Name)
	}
	return nil, badRequest("action %q: want add, list or remove", req.Action)
}

// UsersAt runs req on the bbolt database db: directly when no server
// holds it, else through the server's admin path. It reports which way
// it went (ViaDatabase, ViaServer).
func UsersAt(ctx context.Context, db string, req UserRequest) ([]User, string, error) {
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return nil, "", fmt.Errorf("create the database's directory: %w", err)
	}
	var out []User
	where, err := onBoltFile(db, func(st khaladb.Storage) (err error) {
		out, err = Users{Store: st, Now: time.Now}.do(ctx, req)
		return err
	}, func(info adminInfo) (err error) {
		out, err = adminUsers(ctx, info, req)
		return err
	})
	return out, where, err
}

// UsersInPostgres runs req on the PostgreSQL database dsn.
func UsersInPostgres(ctx context.Context, dsn string, req UserRequest) ([]User, error) {
	var out []User
	err := onPostgres(ctx, dsn, func(st khaladb.Storage) (err error) {
		out, err = Users{Store: st, Now: time.Now}.do(ctx, req)
		return err
	})
	return out, err
}

func adminUsers(ctx context.Context, info adminInfo, req UserRequest) ([]User, error) {
	switch req.Action {
	case "add":
		var u User
		err := info.call(ctx, http.MethodPost, "/v1/admin/users", map[string]any{"name": req.Name, "scopes": req.Scopes}, http.StatusCreated, &u)
		return []User{u}, err
	case "remove":
		return nil, info.call(ctx, http.MethodDelete, "/v1/admin/users/"+url.PathEscape(req.Name), nil, http.StatusOK, nil)
	}
	var out []User
	err := info.call(ctx, http.MethodGet, "/v1/admin/users", nil, http.StatusOK, &out)
	return out, err
}

// IsRefusal reports whether err is the server's or the storage's refusal
// of a request (a bad name, a name taken, no such person): the user's
// mistake, not a failure.
func IsRefusal(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status < 500
}

func (s *Server) users() Users { return Users{Store: s.store, Now: s.now} }

func (s *Server) handleAdminAddUser(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	var req struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	u, err := s.users().Add(r.Context(), req.Name, req.Scopes...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("person added", "person", u.Name)
	writeJSON(w, http.StatusCreated, u)
}

func (s *Server) handleAdminUsers(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	out, err := s.users().List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleAdminRemoveUser(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	name := r.PathValue("name")
	if err := s.users().Remove(r.Context(), name); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("person removed", "person", name)
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "status": "removed"})
}
