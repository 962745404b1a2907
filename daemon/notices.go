package daemon

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// handleNotices lists the blocking notices of local threads that still
// stand: no turn of the thread has started since (api.OpenNotices). They
// are read from the traces, so they outlive a daemon restart.
func (d *Daemon) handleNotices(w http.ResponseWriter, _ *http.Request) {
	out, err := d.notices()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) notices() ([]api.Notice, error) {
	ts, err := d.store.Threads("", workflow.StatusRunning, 0)
	if err != nil {
		return nil, err
	}
	out := []api.Notice{}
	for _, t := range ts {
		evs, err := d.store.Events(t.ID, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, api.OpenNotices(t.Workflow, evs)...)
	}
	slices.SortFunc(out, func(a, b api.Notice) int { return a.At.Compare(b.At) })
	return out, nil
}

// Notices lists the blocking notices of local threads that still stand;
// none from a daemon older than the endpoint.
func (c *Client) Notices(ctx context.Context) ([]api.Notice, error) {
	var out []api.Notice
	err := c.do(ctx, http.MethodGet, "/v1/notices", nil, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, nil
	}
	return out, err
}
