package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// handleNotify puts an agent's notice (the MCP tool notify) in a thread's
// trace. A local thread's goes into the store, where `workflow logs` and
// its followers see it; a remote thread's goes to the remote under the
// claim of the turn this daemon runs for it, since only the holder of a
// turn may add to its thread's trace and the agent's process does not
// know the claim.
func (d *Daemon) handleNotify(w http.ResponseWriter, r *http.Request) {
	var req NotifyRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	d.notify(w, r, req)
}

// notify adds req's notice to its thread's trace and answers.
func (d *Daemon) notify(w http.ResponseWriter, r *http.Request, req NotifyRequest) {
	if err := api.CheckNotify(req.Level, req.Message); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "")
		return
	}
	ref, err := workflow.ParseRef(req.Thread)
	if err == nil && ref.Thread == "" {
		err = fmt.Errorf("%s names no thread", req.Thread)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "a thread's ref is [REMOTE/]WORKFLOW#thread-N")
		return
	}
	if ref.Remote != "" {
		d.notifyRemote(r.Context(), w, ref, req)
		return
	}
	t, err := d.store.Thread(ref.Thread)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("unknown thread %q", ref.Thread), "list threads with 'nerve workflow logs "+ref.Workflow+"'")
		return
	case err != nil:
		writeErr(w, err)
		return
	case t.Workflow != ref.Workflow:
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("%s is a thread of %s, not of %s", t.ID, t.Workflow, ref.Workflow), "")
		return
	case t.Ended():
		writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("%s already ended (%s)", req.Thread, t.Status), "")
		return
	}
	ev := workflow.Event{At: time.Now().UTC(), Type: api.EventNotify, Thread: t.ID, Step: req.Step,
		Agent: d.config().Agent.Name, Status: req.Level, Message: req.Message}
	for _, p := range t.Pending {
		if p.Step == req.Step {
			ev.Role = p.Role
		}
	}
	if err := d.store.AppendEvents(t.ID, ev); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread": req.Thread, "event": api.EventNotify})
}

// notifyRemote sends a notice to the remote thread's trace under the claim
// of a turn this daemon holds (of req.Step, when given).
func (d *Daemon) notifyRemote(ctx context.Context, w http.ResponseWriter, ref workflow.Ref, req NotifyRequest) {
	var held *claimRecord
	for _, c := range d.runner.claims() {
		if c.Remote == ref.Remote && c.Turn.Thread == ref.Thread && c.Turn.Workflow == ref.Workflow && (req.Step == 0 || c.Turn.Step == req.Step) {
			held = &c
			break
		}
	}
	if held == nil {
		writeError(w, http.StatusConflict, codeConflict,
			fmt.Sprintf("this agent runs no turn of %s: a remote thread takes notices only from inside one of its turns", req.Thread), "")
		return
	}
	cl, err := remote.ForConfig(d.config(), ref.Remote)
	if err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = cl.TurnEvents(ctx, held.Turn.Turn, held.Turn.Claim, api.TurnEvent{Type: api.EventNotify, Status: req.Level, Message: req.Message})
	var re *remote.Error
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"thread": req.Thread, "event": api.EventNotify})
	case remote.IsClaimLost(err):
		writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("the turn of %s is no longer this agent's: its claim was lost", req.Thread), "")
	case errors.As(err, &re) && re.Status == http.StatusBadRequest:
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "")
	default:
		writeError(w, http.StatusBadGateway, codeInternal, fmt.Sprintf("send the notice to %s: %v", ref.Remote, err), "")
	}
}

// Notify adds an agent's notice to a thread's trace.
func (c *Client) Notify(ctx context.Context, req NotifyRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/notify", req, nil)
}
