package khala

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

var agentNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

// healthTimeout bounds the storage ping of GET /v1/health, so a load
// balancer's probe gets an answer while the database hangs.
const healthTimeout = 2 * time.Second

// handleHealth answers 200 only when the storage answers: a replica that
// lost its database is 503, with the error shape, until it is back.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the database is unreachable")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "version": s.opts.Version})
}

type enrollRequest struct {
	Name string `json:"name"`
}

func (s *Server) handleEnroll(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	var req enrollRequest
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if !agentNameRE().MatchString(req.Name) {
		s.fail(w, r, badRequest("name %q: an agent name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Name))
		return
	}
	if req.Name == adminName {
		// What the admin token does is recorded under this name: an agent
		// called so would own the workflows the admin published.
		s.fail(w, r, badRequest("name %q is the admin's; choose another name", req.Name))
		return
	}
	tok, h := newToken(prefixAgent)
	err := s.store.Enroll(r.Context(), a.Token, khaladb.Agent{Name: req.Name, Token: h, EnrolledAt: s.now()})
	switch {
	case err == nil:
		s.log.Info("agent enrolled", "agent", req.Name)
		writeJSON(w, http.StatusCreated, map[string]string{"agent": req.Name, "token": tok})
	case errors.Is(err, khaladb.ErrNameTaken):
		s.fail(w, r, fmt.Errorf("%w: an agent named %q is already enrolled; choose another name", khaladb.ErrNameTaken, req.Name))
	default:
		s.fail(w, r, err)
	}
}

func (s *Server) handleMe(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	writeJSON(w, http.StatusOK, map[string]any{"agent": a.Name, "enrolled_at": a.EnrolledAt,
		"scopes": DescribeScopes(a.Scopes, false)})
}

// EnrollTokenRequest asks for an enrollment token; TTL 0 never expires.
type EnrollTokenRequest struct {
	Uses int    `json:"uses"`
	TTL  string `json:"ttl"`
	// Scopes of the agents it enrolls (none: DefaultAgentScopes).
	Scopes []string `json:"scopes,omitempty"`
}

// EnrollTokenResponse is a new enrollment token: shown once, stored only
// as a hash.
type EnrollTokenResponse struct {
	Token     string    `json:"token"`
	Uses      int       `json:"uses"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Scopes    []string  `json:"scopes,omitempty"`
}

func (s *Server) handleAdminEnrollToken(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	var req EnrollTokenRequest
	if err := decodeJSON(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	ttl, err := parseTTL(req.TTL)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := IssueEnrollToken(r.Context(), s.store, req.Uses, ttl, s.now(), req.Scopes...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("enrollment token issued", "uses", resp.Uses, "expires_at", resp.ExpiresAt, "scopes", resp.Scopes)
	writeJSON(w, http.StatusCreated, resp)
}

func parseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, badRequest("ttl %q: want a duration such as 24h, or 0 for no expiry", s)
	}
	return d, nil
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	st, err := s.store.Stats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, st, s.engine.Parked())
	if sw, ok := s.store.(khaladb.SharedWrites); ok {
		writeSharedStatements(w, sw.SharedWrites())
	}
}
