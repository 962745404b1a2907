package khala

import (
	"context"
	"errors"
	"fmt"
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
		if rows, err = s.treeUsage(r.Context(), q.Thread, q.Filter()); err != nil {
			s.fail(w, r, err)
			return
		}
	} else if rows, err = s.store.Usage(r.Context(), q.Filter()); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, usage.Build(rows, q.By, q.Filter()))
}

// treeUsage is a thread's messages as rollup rows, with its children's
// (and theirs): what it spent, as its totals count it, and where (a
// child's rows carry the child's workflow). A running child's messages
// count so far.
func (s *Server) treeUsage(ctx context.Context, id string, f usage.Filter) ([]usage.Row, error) {
	v, err := s.store.Thread(ctx, id)
	if err != nil {
		return nil, err
	}
	rows := workflow.UsageRows(v.Thread.Workflow, v.Messages, f)
	for _, c := range v.Thread.Children {
		sub, err := s.treeUsage(ctx, c.Thread, f)
		if errors.Is(err, khaladb.ErrNotFound) {
			continue // linked, not stored: nothing it spent was kept
		}
		if err != nil {
			return nil, fmt.Errorf("child %s of %s: %w", c.Thread, id, err)
		}
		rows = append(rows, sub...)
	}
	return rows, nil
}
