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
)

// Agents: `nerve khala agent list|revoke`, into a bbolt file whoever
// holds it (AgentsAt: directly, or through the running server's admin
// path, as user does) or into PostgreSQL (AgentsInPostgres).

// AgentInfo is an enrolled agent as `nerve khala agent list` shows it
// (GET /v1/agents's shape).
type AgentInfo struct {
	Name       string     `json:"name"`
	EnrolledAt time.Time  `json:"enrolled_at"`
	LastSeen   *time.Time `json:"last_seen"`
	TurnsHeld  []string   `json:"turns_held"`
	Scopes     []string   `json:"scopes,omitempty"`
}

// AgentRequest is one agent-management request: Action list or revoke.
type AgentRequest struct {
	Action string
	Name   string // revoke's
}

func agentsDo(ctx context.Context, st khaladb.Storage, req AgentRequest) ([]AgentInfo, error) {
	switch req.Action {
	case "list":
		as, err := st.Agents(ctx)
		out := make([]AgentInfo, 0, len(as))
		for _, a := range as {
			ai := AgentInfo{Name: a.Name, EnrolledAt: a.EnrolledAt, TurnsHeld: a.Held, Scopes: a.Scopes}
			if !a.LastSeen.IsZero() {
				ai.LastSeen = &a.LastSeen
			}
			out = append(out, ai)
		}
		return out, err
	case "revoke":
		err := st.RevokeAgent(ctx, req.Name)
		if errors.Is(err, khaladb.ErrNotFound) {
			err = notFound("no agent %q (nerve khala agent list shows them)", req.Name)
		}
		return nil, err
	}
	return nil, badRequest("action %q: want list or revoke", req.Action)
}

// AgentsAt runs req on the bbolt database db: directly when no server
// holds it, else through the server's admin path. It reports which way
// it went (ViaDatabase, ViaServer).
func AgentsAt(ctx context.Context, db string, req AgentRequest) ([]AgentInfo, string, error) {
	if _, err := os.Stat(filepath.Dir(db)); err != nil {
		return nil, "", fmt.Errorf("no Khala database at %s: %w", db, err)
	}
	var out []AgentInfo
	where, err := onBoltFile(db, func(st khaladb.Storage) (err error) {
		out, err = agentsDo(ctx, st, req)
		return err
	}, func(info adminInfo) error {
		if req.Action == "revoke" {
			return info.call(ctx, http.MethodDelete, "/v1/admin/agents/"+url.PathEscape(req.Name), nil, http.StatusOK, nil)
		}
		return info.call(ctx, http.MethodGet, "/v1/agents", nil, http.StatusOK, &out)
	})
	return out, where, err
}

// AgentsInPostgres runs req on the PostgreSQL database dsn: a revoke
// reaches every replica's cache through the database (khalapg).
func AgentsInPostgres(ctx context.Context, dsn string, req AgentRequest) ([]AgentInfo, error) {
	var out []AgentInfo
	err := onPostgres(ctx, dsn, func(st khaladb.Storage) (err error) {
		out, err = agentsDo(ctx, st, req)
		return err
	})
	return out, err
}

func (s *Server) handleAdminRevokeAgent(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	name := r.PathValue("name")
	if _, err := agentsDo(r.Context(), s.store, AgentRequest{Action: "revoke", Name: name}); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("agent revoked", "agent", name)
	writeJSON(w, http.StatusOK, map[string]string{"agent": name, "status": "revoked"})
}
