package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// Workflow is a published cloud workflow.
type Workflow struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Binding     string   `json:"binding"`
	Roles       []string `json:"roles"`
	Version     string   `json:"version"`
	Source      string   `json:"source,omitempty"`
	// Workspace is the definition's workspace, nil when it declares none:
	// then a thread needs no base.
	Workspace *workflow.WorkspaceSpec `json:"workspace"`
}

// Workflows lists the remote's published workflows.
func (c *Client) Workflows(ctx context.Context) ([]Workflow, error) {
	var out []Workflow
	return out, c.Do(ctx, http.MethodGet, "/v1/workflows", nil, &out)
}

// PutWorkflow publishes a definition (YAML, moderator inlined).
func (c *Client) PutWorkflow(ctx context.Context, name string, source []byte) (*Workflow, error) {
	var out Workflow
	err := c.Do(ctx, http.MethodPut, "/v1/workflows/"+url.PathEscape(name), map[string]string{"source": string(source)}, &out)
	return &out, err
}

// StartThread starts a thread of a cloud workflow.
func (c *Client) StartThread(ctx context.Context, name string, input map[string]any, webhook string) (string, error) {
	return c.Start(ctx, name, api.StartThread{Input: input, Webhook: webhook})
}

// Start starts a thread of a cloud workflow, with a workspace when req
// has one.
func (c *Client) Start(ctx context.Context, name string, req api.StartThread) (string, error) {
	body := req
	var out struct {
		Thread string `json:"thread"`
	}
	c2 := *c
	c2.Retries = 0 // a retried start could start two threads
	err := c2.Do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(name)+"/threads", body, &out)
	return out.Thread, err
}

// Thread returns one thread.
func (c *Client) Thread(ctx context.Context, id string) (*workflow.Thread, error) {
	var t workflow.Thread
	return &t, c.Do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id), nil, &t)
}

// Threads lists threads of a workflow, newest first.
func (c *Client) Threads(ctx context.Context, workflowName string, limit int) ([]workflow.Thread, error) {
	q := url.Values{}
	if workflowName != "" {
		q.Set("workflow", workflowName)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []workflow.Thread
	return out, c.Do(ctx, http.MethodGet, "/v1/threads?"+q.Encode(), nil, &out)
}

// Cancel cancels a thread.
func (c *Client) Cancel(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// Messages queries a thread's messages.
func (c *Client) Messages(ctx context.Context, id string, f workflow.Filter) ([]workflow.Message, error) {
	var out []workflow.Message
	return out, c.Do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id)+"/messages?"+f.Values().Encode(), nil, &out)
}

// Events follows a thread's server-sent event stream from after, calling
// fn for each event, until the stream ends (the thread ended) or ctx is
// done. A dropped stream is resumed from the last event seen.
func (c *Client) Events(ctx context.Context, id string, after uint64, fn func(workflow.Event) error) error {
	backoff := 200 * time.Millisecond
	for {
		done, err := c.events(ctx, id, &after, fn)
		if done || ctx.Err() != nil {
			return err
		}
		if e, ok := err.(*Error); ok && !e.Transient() {
			return err
		}
		if err == nil {
			// Closed without an end event: ended before we connected, or
			// the server is going away. Ask, then resume if still running.
			t, terr := c.Thread(ctx, id)
			if terr == nil && t.Ended() {
				return nil
			}
		}
		if err := c.sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// events reads one connection's worth of the stream. done means the
// server ended it (or fn failed); otherwise it dropped and may resume.
func (c *Client) events(ctx context.Context, id string, after *uint64, fn func(workflow.Event) error) (bool, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id)+"/events?after="+strconv.FormatUint(*after, 10), nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
		case line == "" && data.Len() > 0:
			var e workflow.Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return true, fmt.Errorf("remote %s: malformed event: %w", c.Name, err)
			}
			data.Reset()
			*after = e.Seq
			if err := fn(e); err != nil {
				return true, err
			}
			if e.Type == workflow.EventThreadEnded {
				return true, nil
			}
		}
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	if sc.Err() != nil {
		return false, &Error{Remote: c.Name, URL: c.BaseURL, Message: "event stream dropped: " + sc.Err().Error(), Err: sc.Err()}
	}
	return false, nil
}

// Workflow reads one published workflow with its source.
func (c *Client) Workflow(ctx context.Context, name string) (*Workflow, error) {
	var w Workflow
	return &w, c.Do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(name), nil, &w)
}

// Trace returns a thread's events so far.
func (c *Client) Trace(ctx context.Context, id string) ([]workflow.Event, error) {
	var out []workflow.Event
	return out, c.Do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id)+"/trace", nil, &out)
}

// Usage totals the remote's usage by a dimension (GET /v1/usage).
func (c *Client) Usage(ctx context.Context, q usage.Query) (*usage.Report, error) {
	var r usage.Report
	return &r, c.Do(ctx, http.MethodGet, "/v1/usage?"+q.Values().Encode(), nil, &r)
}
