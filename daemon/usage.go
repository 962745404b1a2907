package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	spend "github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// The usage package is imported as spend: usage() builds a usage error here.

// handleUsage totals local usage by a dimension: from the store's rollup,
// or from one thread's messages (?thread=).
func (d *Daemon) handleUsage(w http.ResponseWriter, r *http.Request) {
	q, err := spend.ParseQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "")
		return
	}
	var rows []spend.Row
	if q.Thread != "" {
		rows, err = d.threadUsage(q)
	} else {
		rows, err = d.store.Usage(q.Filter())
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("unknown thread %q", q.Thread), "")
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, spend.Build(rows, q.By, q.Filter()))
}

// threadUsage is one thread's messages as rollup rows, with its
// children's (workflow.TreeUsageRows).
func (d *Daemon) threadUsage(q spend.Query) ([]spend.Row, error) {
	return workflow.TreeUsageRows(q.Thread, q.Filter(), d.usageOf, func(err error) bool { return errors.Is(err, store.ErrNotFound) })
}

// usageOf reads what a thread's usage report needs of it.
func (d *Daemon) usageOf(id string) (workflow.UsageOf, error) {
	t, err := d.store.Thread(id)
	if err != nil {
		return workflow.UsageOf{}, err
	}
	msgs, err := d.store.Messages(t.ID)
	if err != nil {
		return workflow.UsageOf{}, err
	}
	children, err := d.store.Children(t.ID)
	if err != nil {
		return workflow.UsageOf{}, err
	}
	u := workflow.UsageOf{Workflow: t.Workflow, Messages: msgs}
	for _, c := range children {
		u.Children = append(u.Children, c.ID)
	}
	return u, nil
}

// Usage asks the daemon for local spend.
func (c *Client) Usage(ctx context.Context, q spend.Query) (*spend.Report, error) {
	var r spend.Report
	return &r, c.do(ctx, http.MethodGet, "/v1/usage?"+q.Values().Encode(), nil, &r)
}
