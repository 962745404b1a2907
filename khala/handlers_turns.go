package khala

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/api"
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
	ctx := r.Context()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var (
		turns    []khaladb.Turn
		handedWS map[string]threadWS // of handed-over turns' threads
	)
	for {
		// Take the hint before looking, so a turn queued in between
		// still wakes us.
		hint := s.store.Changed(khaladb.TopicQueue)
		q.Now = s.now()
		var err error
		turns, err = s.store.Claim(ctx, q)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(turns) > 0 || wait == 0 {
			break
		}
		// While parked, an answer that queues a turn this poll takes
		// may hand it over in its own commit (handoff.go).
		wt := s.handoffs.park(q)
		stop, handed := false, false
		select {
		case turns = <-wt.got:
			handed = true
		case <-hint:
		case <-time.After(s.opts.Recheck):
		case <-timer.C:
			stop = true
		case <-s.closing:
			stop = true
		case <-ctx.Done():
			stop = true
		}
		if !handed {
			turns = s.handoffs.leave(wt)
		}
		if len(turns) > 0 {
			handedWS = wt.ws
		}
		if len(turns) > 0 || stop {
			break
		}
	}
	if ctx.Err() != nil {
		s.giveBack(turns) // the agent is gone
		return
	}
	ws, err := s.claimWorkspaces(ctx, turns, handedWS)
	if err != nil {
		s.giveBack(turns)
		s.fail(w, r, err)
		return
	}
	out := make([]api.Turn, 0, len(turns))
	for _, t := range turns {
		s.metrics.claimWait.observe(max(q.Now.Sub(t.QueuedAt), 0))
		s.sweep.poke(t.LeaseExpires)
		out = append(out, api.Turn{Turn: t.ID, Claim: t.Claim, Thread: t.Thread, Workflow: t.Workflow, Role: t.Role,
			Prompt: t.Prompt, Instruction: t.Instruction, Step: t.Step, Attempt: t.Attempt, LeaseExpires: t.LeaseExpires,
			Workspace: ws[t.Thread].ws, Parallel: ws[t.Thread].round.Has(t.Step), Merge: mergeWork(&t)})
	}
	s.metrics.turnsClaimed.Add(int64(len(turns)))
	s.metrics.claimRequests.observe(time.Since(start))
	writeJSON(w, http.StatusOK, out)
}

// claimWorkspaces returns the workspace of each claimed turn's thread
// that has one. A handed-over turn's came with the change that queued it;
// a turn whose claim read its thread (Turn.Head) brought its own; a thread
// known to have none (handoffs.isBare) costs nothing; any other turn taken
// from the queue costs one read of its thread (one per thread, however
// many of its turns were claimed), for the head it starts from.
func (s *Server) claimWorkspaces(ctx context.Context, turns []khaladb.Turn, handed map[string]threadWS) (map[string]threadWS, error) {
	var out map[string]threadWS
	seen := map[string]bool{}
	for _, t := range turns {
		if seen[t.Thread] {
			continue
		}
		seen[t.Thread] = true
		ws, ok := handed[t.Thread]
		if !ok && t.Head != nil {
			ws, ok = threadWS{ws: t.Head.Workspace, round: t.Head.Round}, true
		}
		if !ok && !s.handoffs.isBare(t.Thread) {
			v, err := s.store.Thread(ctx, t.Thread)
			if err != nil {
				return nil, err
			}
			if ws = (threadWS{ws: v.Thread.Workspace, round: v.Thread.Round}); ws.ws == nil {
				s.handoffs.sawBare(t.Thread)
			}
		}
		if ws.ws != nil {
			if out == nil {
				out = map[string]threadWS{}
			}
			out[t.Thread] = ws
		}
	}
	return out, nil
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
	t, err := s.store.Heartbeat(r.Context(), turn, claim, a.Name, s.now())
	switch {
	case errors.Is(err, khaladb.ErrNotFound):
		err = notFound("unknown turn %q", turn)
	case errors.Is(err, khaladb.ErrNotHolder):
		err = notHolder(turn)
	}
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
	var (
		c       *khaladb.ThreadChange
		status  string
		claimed time.Time
		now     time.Time
		fresh   bool // recorded now, not a resent answer
	)
	var handed *reservation
	defer func() { handed.settle(false) }() // if UpdateThread never returned
	docs, releaseDocs := s.docs.acquire(thread)
	defer releaseDocs()
	err = s.updateRouted(r.Context(), thread, func(v *khaladb.ThreadView, rt routing) (*khaladb.ThreadChange, error) {
		handed.settle(false) // an earlier, stale try's promises
		handed = nil
		now = s.now()
		var err error
		c, err = answer(r.Context(), s.defs, docs, v, turn, answerRequest{Claim: req.Claim, Agent: a.Name, Message: m, Step: req.Step}, rt, now)
		if err != nil {
			return nil, err
		}
		status, claimed = c.Thread.Status, v.Turn(turn).ClaimedAt
		handed = s.handoffs.reserve(c, now)
		return c, nil
	})
	handed.settle(err == nil)
	handed = nil
	if errors.Is(err, errTurnClosed) {
		// A resent answer (the agent's outbox after a lost 200) is
		// acknowledged again; any other claim on a closed turn is stale.
		status, err = s.closedTurn(r, turn, req.Claim, a.Name, true)
	} else if err == nil {
		s.metrics.turnsAnswered.Add(1)
		s.metrics.turnDuration.observe(now.Sub(claimed))
		s.changed(c)
		fresh = true
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown turn %q", turn)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := responseJSON{Turn: turn, Thread: thread, Status: status}
	if fresh {
		// What the server added to the message: the agent can then
		// extend its copy of the thread without reading it back.
		out.Agent, out.At = a.Name, now
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

// closedTurn resolves agent's request for a turn that is not open:
// unknown (ErrNotFound), another agent's claim (ErrNotHolder), answered
// under this claim (the thread's status, when answerOK), or stale
// (ErrClaimLost).
func (s *Server) closedTurn(r *http.Request, turn, claim, agent string, answerOK bool) (string, error) {
	t, err := s.store.Turn(r.Context(), turn)
	if err != nil {
		return "", err
	}
	if t.Claim == claim && t.Agent != agent {
		return "", notHolder(turn)
	}
	if !answerOK || t.State != khaladb.TurnAnswered || t.Claim != claim {
		return "", khaladb.ErrClaimLost
	}
	v, err := s.store.Thread(r.Context(), t.Thread)
	if err != nil {
		return "", err
	}
	return v.Thread.Status, nil
}

// giveBack re-queues turns claimed for a long poll whose agent left
// before it could be told: another agent need not wait for their lease.
func (s *Server) giveBack(turns []khaladb.Turn) {
	for _, t := range turns {
		_ = s.releaseTurn(context.Background(), t.Thread, t.ID, t.Claim, t.Agent)
	}
}

// releaseTurn puts a claimed turn back in the queue, for its holder.
func (s *Server) releaseTurn(ctx context.Context, thread, turn, claim, agent string) error {
	var c *khaladb.ThreadChange
	err := s.store.UpdateThread(ctx, thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		var err error
		c, err = release(v, turn, claim, agent, s.now())
		return c, err
	})
	if err == nil && c != nil {
		s.metrics.turnsReleased.Add(1)
		s.changed(c)
	}
	return err
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	turn, thread, claim, err := turnClaim(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.releaseTurn(r.Context(), thread, turn, claim, a.Name)
	if errors.Is(err, errTurnClosed) {
		_, err = s.closedTurn(r, turn, claim, a.Name, false)
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown turn %q", turn)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"turn": turn, "status": khaladb.TurnQueued})
}
