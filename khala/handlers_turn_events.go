package khala

import (
	"net/http"
	"strings"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Bounds of a turn's events request.
const (
	maxTurnEvents   = 16
	maxEventStatus  = 32
	maxEventMessage = 4096
)

// handleTurnEvents adds what an agent noticed while running a turn it
// holds (a detection: stall, errors, malformed; or the agent's own
// notify) to the thread's trace: engine.TurnEvents.
func (s *Server) handleTurnEvents(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	turn, thread, err := turnThread(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.TurnEvents
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkTurnEvents(req); err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.engine.TurnEvents(r.Context(), thread, turn, req.Claim, a.Name, req.Events)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"turn": turn, "events": len(req.Events)})
}

// checkTurnEvents accepts a claim and 1 to maxTurnEvents detections (each
// with a kind and a bounded message) or notices (a level and a message).
func checkTurnEvents(req api.TurnEvents) error {
	switch {
	case req.Claim == "":
		return badRequest("claim is required: the id the claim returned")
	case len(req.Events) == 0 || len(req.Events) > maxTurnEvents:
		return badRequest("events: want 1 to %d events", maxTurnEvents)
	}
	for i, e := range req.Events {
		if e.Type == api.EventNotify {
			if err := api.CheckNotify(e.Status, e.Message); err != nil {
				return badRequest("events[%d]: %s", i, err)
			}
			continue
		}
		switch {
		case e.Type != workflow.EventDetection:
			return badRequest("events[%d].type %q: only %q and %q events are accepted", i, e.Type, workflow.EventDetection, api.EventNotify)
		case e.Status == "" || len(e.Status) > maxEventStatus || strings.ContainsFunc(e.Status, notKindRune):
			return badRequest("events[%d].status %q: want the detection's kind, such as stall, errors or malformed", i, e.Status)
		case len(e.Message) > maxEventMessage:
			return badRequest("events[%d].message: longer than %d bytes", i, maxEventMessage)
		case len(e.Adapter) > maxEventStatus*2:
			return badRequest("events[%d].adapter: longer than %d bytes", i, maxEventStatus*2)
		}
	}
	return nil
}

// notKindRune reports a rune a detection kind may not hold.
func notKindRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
}
