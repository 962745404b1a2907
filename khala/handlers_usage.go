package khala

import (
	"context"
	"errors"
	"net/http"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// handleUsage totals usage by a dimension (?by=, since=, workflow=): from
// the rollup kept as answers are written, or from one thread's messages
// and its children's (?thread=).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	q, err := usage.ParseQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, badRequest("%s", err))
		return
	}
	var rows []usage.Row
	if q.Thread != "" {
		read := func(id string) (workflow.UsageOf, error) { return s.usageOf(r.Context(), id) }
		missing := func(err error) bool { return errors.Is(err, khaladb.ErrNotFound) }
		if rows, err = workflow.TreeUsageRows(q.Thread, q.Filter(), read, missing); err != nil {
			s.fail(w, r, err)
			return
		}
	} else if rows, err = s.store.Usage(r.Context(), q.Filter()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, usage.Build(rows, q.By, q.Filter()))
}

// usageOf reads what a thread's usage report needs of it.
func (s *Server) usageOf(ctx context.Context, id string) (workflow.UsageOf, error) {
	v, err := s.store.Thread(ctx, id)
	if err != nil {
		return workflow.UsageOf{}, err
	}
	u := workflow.UsageOf{Workflow: v.Thread.Workflow, Messages: v.Messages}
	for _, c := range v.Thread.Children {
		u.Children = append(u.Children, c.Thread)
	}
	return u, nil
}
