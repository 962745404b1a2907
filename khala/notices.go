package khala

import (
	"context"
	"net/http"
	"slices"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// handleNotices lists the blocking notices that still stand (GET
// /v1/notices): a person's inbox shows them beside the turns to answer.
func (s *Server) handleNotices(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	out, err := s.notices(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// notices reads the traces of the running threads that had a blocking
// notice since their last answered turn began (Thread.Noticed), and keeps
// the notices no turn has started after, oldest first.
func (s *Server) notices(ctx context.Context) ([]api.Notice, error) {
	ts, err := s.store.Threads(ctx, khaladb.ThreadQuery{Status: workflow.StatusRunning})
	if err != nil {
		return nil, err
	}
	out := []api.Notice{}
	for _, t := range ts {
		if t.Noticed.IsZero() {
			continue
		}
		evs, err := s.store.Events(ctx, t.ID, 0, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, api.OpenNotices(t.Workflow, evs)...)
	}
	slices.SortFunc(out, func(a, b api.Notice) int { return a.At.Compare(b.At) })
	return out, nil
}
