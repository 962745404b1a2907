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
// children's (and theirs): what it spent, as its totals count it, and
// where (a child's rows carry the child's workflow). A running child's
// messages count so far.
func (d *Daemon) threadUsage(q spend.Query) ([]spend.Row, error) {
	t, err := d.store.Thread(q.Thread)
	if err != nil {
		return nil, err
	}
	return d.treeUsage(t, q.Filter())
}

func (d *Daemon) treeUsage(t *workflow.Thread, f spend.Filter) ([]spend.Row, error) {
	msgs, err := d.store.Messages(t.ID)
	if err != nil {
		return nil, err
	}
	rows := workflow.UsageRows(t.Workflow, msgs, f)
	children, err := d.store.Children(t.ID)
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		ct, err := d.store.Thread(c.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // indexed, not stored: nothing it spent was kept
		}
		if err != nil {
			return nil, fmt.Errorf("child %s of %s: %w", c.ID, t.ID, err)
		}
		sub, err := d.treeUsage(ct, f)
		if err != nil {
			return nil, err
		}
		rows = append(rows, sub...)
	}
	return rows, nil
}

// Usage asks the daemon for local spend.
func (c *Client) Usage(ctx context.Context, q spend.Query) (*spend.Report, error) {
	var r spend.Report
	return &r, c.do(ctx, http.MethodGet, "/v1/usage?"+q.Values().Encode(), nil, &r)
}
