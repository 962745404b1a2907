package main

import (
	"context"

	"github.com/nerve-agents/nerve/internal/usage"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/threadquery"
	"github.com/nerve-agents/nerve/workflow"
)

// threadSource is where a ref's threads live: this NERVE_HOME's daemon or
// a remote's Khala. Commands that start, read, follow or cancel a thread
// (workflow run, logs, cancel; thread messages) talk to one of these and
// do not care which side answers.
type threadSource interface {
	// Start starts a thread of req.Workflow (or, locally, of req.File).
	Start(ctx context.Context, req daemon.StartRequest) (*workflow.Thread, error)
	Thread(ctx context.Context, id string) (*workflow.Thread, error)
	// Threads lists a workflow's threads, newest first.
	Threads(ctx context.Context, workflowName string) ([]*workflow.Thread, error)
	Messages(ctx context.Context, id string, f workflow.Filter) ([]workflow.Message, error)
	// Events calls fn for each event of the thread so far; with follow
	// it goes on until the thread ends or ctx is done.
	Events(ctx context.Context, id string, follow bool, fn func(workflow.Event) error) error
	// Cancel cancels a thread and returns it as it is afterwards.
	Cancel(ctx context.Context, id string) (*workflow.Thread, error)
	// Usage totals usage by a dimension (GET /v1/usage).
	Usage(ctx context.Context, q usage.Query) (*usage.Report, error)
	// Where says where a thread goes on when the CLI stops following it.
	Where() string
}

var (
	_ threadSource = daemonSource{}
	_ threadSource = remoteSource{}
)

// threadSource returns the side a ref's threads live on: the remote it
// names, else the local daemon (started in the background if need be).
// Inside a turn, the turn's own thread, a remote one too, is read through
// the turn's socket: inside a sandbox there is no remote's token.
func (f *Factory) threadSource(ctx context.Context, ref workflow.Ref) (threadSource, error) {
	if ref.Remote != "" && !threadquery.TurnFromEnv(f.Getenv).Own(ref) {
		c, err := remoteClient(f, ref.Remote)
		if err != nil {
			return nil, err
		}
		return remoteSource{c}, nil
	}
	c, err := f.daemonClient(ctx)
	if err != nil {
		return nil, err
	}
	return daemonSource{c}, nil
}

// daemonSource is the local daemon as a threadSource.
type daemonSource struct{ c *daemon.Client }

func (s daemonSource) Start(ctx context.Context, req daemon.StartRequest) (*workflow.Thread, error) {
	return s.c.Start(ctx, req)
}
func (s daemonSource) Thread(ctx context.Context, id string) (*workflow.Thread, error) {
	return s.c.Thread(ctx, id)
}
func (s daemonSource) Threads(ctx context.Context, name string) ([]*workflow.Thread, error) {
	return s.c.Threads(ctx, name, "", 0)
}
func (s daemonSource) Messages(ctx context.Context, id string, f workflow.Filter) ([]workflow.Message, error) {
	return s.c.Messages(ctx, id, f)
}
func (s daemonSource) Events(ctx context.Context, id string, follow bool, fn func(workflow.Event) error) error {
	return s.c.Events(ctx, id, 0, follow, fn)
}
func (s daemonSource) Cancel(ctx context.Context, id string) (*workflow.Thread, error) {
	return s.c.Cancel(ctx, id)
}
func (s daemonSource) Usage(ctx context.Context, q usage.Query) (*usage.Report, error) {
	return s.c.Usage(ctx, q)
}
func (s daemonSource) Where() string { return "in the daemon" }

// remoteSource is a remote's Khala as a threadSource. The server's
// refusals of a request (unknown thread or workflow, bad input) are usage
// errors, as the same mistakes are locally.
type remoteSource struct{ c *remote.Client }

func (s remoteSource) Start(ctx context.Context, req daemon.StartRequest) (*workflow.Thread, error) {
	start := api.StartThread{Input: req.Input, Priority: req.Priority}
	if w := req.Workspace; w != nil {
		start.Workspace = &api.StartWorkspace{Repo: w.Repo, Base: w.Base, Branch: w.Branch, Taken: w.Taken}
	}
	if p, err := workflow.ParseRef(req.Parent); req.Parent != "" && err == nil && p.Thread != "" {
		// Started from inside a turn of a thread of this remote: its child.
		start.Parent = &api.StartParent{Thread: p.Thread, Turn: req.ParentTurn}
	}
	id, err := s.c.Start(ctx, req.Workflow, start)
	if err != nil {
		return nil, remoteUsage(err)
	}
	t := &workflow.Thread{ID: id, Workflow: req.Workflow, Status: workflow.StatusRunning, Input: req.Input}
	if req.Priority != nil {
		t.Priority = *req.Priority
	}
	return t, nil
}

func (s remoteSource) Thread(ctx context.Context, id string) (*workflow.Thread, error) {
	t, err := s.c.Thread(ctx, id)
	return t, remoteUsage(err)
}

func (s remoteSource) Threads(ctx context.Context, name string) ([]*workflow.Thread, error) {
	ts, err := s.c.Threads(ctx, name, 0)
	if err != nil {
		return nil, remoteUsage(err)
	}
	out := make([]*workflow.Thread, len(ts))
	for i := range ts {
		out[i] = &ts[i]
	}
	return out, nil
}

func (s remoteSource) Messages(ctx context.Context, id string, f workflow.Filter) ([]workflow.Message, error) {
	ms, err := s.c.Messages(ctx, id, f)
	return ms, remoteUsage(err)
}

func (s remoteSource) Events(ctx context.Context, id string, follow bool, fn func(workflow.Event) error) error {
	if follow {
		return s.c.Events(ctx, id, 0, fn)
	}
	// What exists now, even while the thread runs on.
	evs, err := s.c.Trace(ctx, id)
	if err != nil {
		return remoteUsage(err)
	}
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (s remoteSource) Cancel(ctx context.Context, id string) (*workflow.Thread, error) {
	if err := s.c.Cancel(ctx, id); err != nil {
		return nil, remoteUsage(err)
	}
	return s.Thread(ctx, id)
}

func (s remoteSource) Usage(ctx context.Context, q usage.Query) (*usage.Report, error) {
	r, err := s.c.Usage(ctx, q)
	return r, remoteUsage(err)
}

func (s remoteSource) Where() string { return "at " + s.c.Name }
