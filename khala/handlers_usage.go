package khala

import (
	"net/http"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// handleUsage totals usage by a dimension (?by=, since=, workflow=): from
// the rollup kept as answers are written, or from one thread's messages
// (?thread=).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	q, err := usage.ParseQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, badRequest("%s", err))
		return
	}
	var rows []usage.Row
	if q.Thread != "" {
		v, err := s.store.Thread(r.Context(), q.Thread)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rows = workflow.UsageRows(v.Thread.Workflow, v.Messages, q.Filter())
	} else if rows, err = s.store.Usage(r.Context(), q.Filter()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, usage.Build(rows, q.By, q.Filter()))
}
