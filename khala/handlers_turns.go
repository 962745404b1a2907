package khala

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/workflow"
)

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	start := time.Now()
	var req api.ClaimRequest
	if err := decodeJSON(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	wait := time.Duration(req.Wait)
	switch {
	case req.Max < 0 || req.Max > maxClaim:
		s.fail(w, r, badRequest("max %d: want 1 to %d turns", req.Max, maxClaim))
		return
	case wait < 0:
		s.fail(w, r, badRequest("wait %s: a wait cannot be negative", wait))
		return
	case len(req.Workflows) > maxFilter || len(req.Roles) > maxFilter:
		s.fail(w, r, badRequest("name at most %d workflows and %d roles", maxFilter, maxFilter))
		return
	}
	repos, err := claimRepos(req.Repos)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait = min(wait, s.opts.MaxWait)
	q := khaladb.ClaimQuery{Agent: a.Name, Max: max(req.Max, 1), Workflows: req.Workflows, Roles: req.Roles, Repos: repos}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(wait + s.opts.RequestTimeout))
	out, err := s.engine.Claim(r.Context(), q, wait, s.closing)
	if errors.Is(err, engine.ErrCallerGone) {
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.claimRequests.observe(time.Since(start))
	writeJSON(w, http.StatusOK, out)
}

type claimBody struct {
	Claim string `json:"claim"`
}

func decodeClaim(r *http.Request) (string, error) {
	var req claimBody
	if err := decodeJSON(r, &req, false); err != nil {
		return "", err
	}
	if req.Claim == "" {
		return "", badRequest("claim is required: the id the claim returned")
	}
	return req.Claim, nil
}

// turnThread returns the thread of the turn in the path.
func turnThread(r *http.Request) (turn, thread string, err error) {
	turn = r.PathValue("turn")
	thread, _, _, ok := khaladb.ParseTurnID(turn)
	if !ok {
		return turn, "", notFound("unknown turn %q", turn)
	}
	return turn, thread, nil
}

// turnClaim reads a holder's request on the turn in the path: the turn,
// its thread and the claim in the body.
func turnClaim(r *http.Request) (turn, thread, claim string, err error) {
	if turn, thread, err = turnThread(r); err == nil {
		claim, err = decodeClaim(r)
	}
	return turn, thread, claim, err
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	turn, _, claim, err := turnClaim(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.engine.Heartbeat(r.Context(), turn, claim, a.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"lease_expires_at": t.LeaseExpires, "cancel": t.State == khaladb.TurnCancelled})
}

type responseRequest struct {
	Claim   string            `json:"claim"`
	Content string            `json:"content"`
	Meta    json.RawMessage   `json:"meta"`
	Error   json.RawMessage   `json:"error"`
	Adapter string            `json:"adapter"`
	Usage   *usage.Usage      `json:"usage"`
	Commit  string            `json:"commit"`
	Changes *workflow.Changes `json:"changes"`
	Step    int               `json:"step"`
}

// message checks the answer's parts and returns it as a message.
func (req *responseRequest) message() (workflow.Message, error) {
	m := workflow.Message{Content: req.Content, Adapter: req.Adapter, Usage: req.Usage, Commit: req.Commit, Changes: req.Changes}
	if req.Claim == "" {
		return m, badRequest("claim is required: the id the claim returned")
	}
	if err := checkChanges(req.Commit, req.Changes); err != nil {
		return m, err
	}
	if len(req.Meta) > 0 && !bytes.Equal(req.Meta, []byte("null")) {
		if err := json.Unmarshal(req.Meta, &m.Meta); err != nil {
			return m, badRequest("meta: %s", jsonErr(err))
		}
	}
	if len(req.Error) > 0 && !bytes.Equal(req.Error, []byte("null")) {
		var s string
		if json.Unmarshal(req.Error, &s) == nil {
			m.Error = &workflow.MessageError{Kind: "agent", Message: s}
		} else {
			var me workflow.MessageError
			if err := json.Unmarshal(req.Error, &me); err != nil {
				return m, badRequest("error: want a string or {\"kind\", \"message\"}")
			}
			if strings.TrimSpace(me.Message) == "" {
				return m, badRequest("error.message is required when error is given")
			}
			if me.Kind == "" {
				me.Kind = "agent"
			}
			m.Error = &me
		}
	}
	return m, nil
}

func (s *Server) handleResponse(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	turn, thread, err := turnThread(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req responseRequest
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	m, err := req.message()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	got, err := s.engine.Answer(r.Context(), thread, turn, engine.AnswerRequest{Claim: req.Claim, Agent: a.Name, Message: m, Step: req.Step})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := responseJSON{Turn: turn, Thread: thread, Status: got.Status}
	if got.Fresh {
		// What the server added to the message: the agent can then
		// extend its copy of the thread without reading it back.
		out.Agent, out.At = a.Name, got.At
	}
	writeJSON(w, http.StatusOK, out)
}

// responseJSON answers a response: the thread's status after it, and for
// an answer recorded by this request the message's agent and time.
type responseJSON struct {
	Turn   string    `json:"turn"`
	Thread string    `json:"thread"`
	Status string    `json:"status"`
	Agent  string    `json:"agent,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	turn, thread, claim, err := turnClaim(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.engine.Release(r.Context(), thread, turn, claim, a.Name); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"turn": turn, "status": khaladb.TurnQueued})
}
