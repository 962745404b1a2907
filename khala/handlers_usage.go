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
	rep, err := s.usageReport(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// usageReport answers a usage query: the API's and the console's, so
// both give the same figures.
func (s *Server) usageReport(ctx context.Context, q usage.Query) (*usage.Report, error) {
	if q.By == "" {
		q.By = "workflow"
	}
	var (
		rows []usage.Row
		err  error
	)
	if q.Thread != "" {
		read := func(id string) (workflow.UsageOf, error) { return s.usageOf(ctx, id) }
		missing := func(err error) bool { return errors.Is(err, khaladb.ErrNotFound) }
		rows, err = workflow.TreeUsageRows(q.Thread, q.Filter(), read, missing)
	} else {
		rows, err = s.store.Usage(ctx, q.Filter())
	}
	if err != nil {
		return nil, err
	}
	rep := usage.Build(rows, q.By, q.Filter())
	return &rep, nil
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
