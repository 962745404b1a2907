package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// WorkflowEntry is one workflow as `nerve workflow list --json` shows it.
type WorkflowEntry struct {
	Ref         string `json:"ref" jsonschema:"what workflow_run takes: NAME, or REMOTE/NAME"`
	Name        string `json:"name"`
	Remote      string `json:"remote"`
	Binding     string `json:"binding"`
	Description string `json:"description"`
	// Error says why a remote's workflows could not be listed.
	Error string `json:"error,omitempty"`
}

// WorkflowListOutput is the local workflows, then each remote's.
type WorkflowListOutput struct {
	Workflows []WorkflowEntry `json:"workflows"`
	// Warnings name local definitions that could not be read.
	Warnings []string `json:"warnings,omitempty"`
}

// WorkflowRunInput is workflow_run's arguments.
type WorkflowRunInput struct {
	Workflow       string         `json:"workflow" jsonschema:"the workflow's ref from workflow_list: NAME for a local one, REMOTE/NAME for a remote's"`
	Input          map[string]any `json:"input,omitempty" jsonschema:"the workflow's inputs by name"`
	Wait           bool           `json:"wait,omitempty" jsonschema:"wait for the thread to end and return its result (at most timeout_seconds)"`
	TimeoutSeconds int            `json:"timeout_seconds,omitempty" jsonschema:"how long wait waits (default 300, at most 3600); past it the thread goes on and the status is running"`
}

// RunOutput is `workflow run --json`'s shape.
type RunOutput struct {
	Thread string `json:"thread" jsonschema:"the thread's ref, for thread_status and thread_messages"`
	Status string `json:"status"`
	// Result's description also keeps its schema an object: a bare `any`
	// becomes the boolean schema true, which Gemini CLI's MCP client
	// rejects, and then it drops every tool of the server.
	Result any    `json:"result" jsonschema:"what the thread completed with, once it has"`
	Error  string `json:"error,omitempty"`
}

// Bounds of workflow_run's wait.
const (
	defaultRunWait = 5 * time.Minute
	maxRunWait     = time.Hour
	// remoteListTimeout bounds each remote's answer to workflow_list.
	remoteListTimeout = 5 * time.Second
)

func (s *server) addWorkflowTools(srv *sdk.Server) {
	addTool(srv, &sdk.Tool{
		Name:        "workflow_list",
		Title:       "List workflows",
		Description: `List the workflows you can start with workflow_run: local ones by name, then each remote's as REMOTE/NAME, with their binding and description. A remote that cannot be reached is listed with its error.`,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.workflowList)
	if s.opts.ReadOnly {
		return
	}
	addTool(srv, &sdk.Tool{
		Name:  "workflow_run",
		Title: "Start a workflow",
		Description: `Start a thread of a workflow (see workflow_list) with its inputs, and return the thread's ref and status.
With wait: true it waits for the thread to end (at most timeout_seconds) and returns its result or error;
otherwise follow it with thread_status and thread_messages.`,
		InputSchema: schemaFor[WorkflowRunInput](func(p map[string]*jsonschema.Schema) {
			p["workflow"].MinLength = ptr(1)
			p["timeout_seconds"].Minimum = ptr(0.0)
			p["timeout_seconds"].Maximum = ptr(maxRunWait.Seconds())
		}),
	}, s.workflowRun)
}

func (s *server) workflowList(ctx context.Context, _ struct{}) (WorkflowListOutput, error) {
	out := WorkflowListOutput{Workflows: []WorkflowEntry{}}
	if s.opts.Config == nil {
		return out, nil
	}
	cfg, err := s.opts.Config()
	if err != nil {
		return out, err
	}
	for _, e := range workflow.List(cfg.Workflows) {
		if e.Def == nil {
			msg, _, _ := strings.Cut(e.Err.Error(), "\n")
			out.Warnings = append(out.Warnings, msg)
			continue
		}
		out.Workflows = append(out.Workflows, WorkflowEntry{Ref: e.Name, Name: e.Name, Binding: e.Def.Binding, Description: e.Def.Description})
	}
	names := slices.Sorted(maps.Keys(cfg.Remotes))
	for _, l := range remote.ListAll(ctx, names, remoteListTimeout, s.remote) {
		if l.Unreachable != "" {
			out.Workflows = append(out.Workflows, WorkflowEntry{Ref: l.Remote + "/", Remote: l.Remote, Error: l.Unreachable})
			continue
		}
		for _, w := range l.Workflows {
			out.Workflows = append(out.Workflows, WorkflowEntry{Ref: l.Remote + "/" + w.Name, Name: w.Name, Remote: l.Remote, Binding: w.Binding, Description: w.Description})
		}
	}
	return out, nil
}

// workflowRun starts a thread. Inside a turn of a local thread, a local
// workflow's thread is that thread's child (its depth checked by the
// daemon).
func (s *server) workflowRun(ctx context.Context, in WorkflowRunInput) (RunOutput, error) {
	ref, err := workflow.ParseRef(in.Workflow)
	if err != nil {
		return RunOutput{}, err
	}
	if ref.Thread != "" {
		return RunOutput{}, usagef("%s names a thread; workflow_run takes a workflow (follow a thread with thread_status)", in.Workflow)
	}
	// A remote turn's children are on its remote: a bare name is that
	// remote's workflow, never this machine's (cmd/nerve's
	// remoteTurnTarget; the daemon refuses such a local start too).
	if turn, err := workflow.ParseRef(s.opts.Getenv("NERVE_THREAD")); err == nil && turn.Remote != "" && turn.Thread != "" {
		switch {
		case ref.Remote == "":
			ref.Remote = turn.Remote
		case ref.Remote != turn.Remote:
			return RunOutput{}, usagef("a remote turn (%s) may not start a workflow on %s; its children run on its remote %s", turn, ref.Remote, turn.Remote)
		}
	}
	wait := defaultRunWait
	if in.TimeoutSeconds > 0 {
		wait = min(time.Duration(in.TimeoutSeconds)*time.Second, maxRunWait)
	}
	if ref.Remote != "" {
		return s.runRemote(ctx, ref, in, wait)
	}
	c, err := s.daemonClient(ctx)
	if err != nil {
		return RunOutput{}, err
	}
	req := daemon.StartRequest{Workflow: ref.Workflow, Input: in.Input, Workdir: s.workdir(), Parent: s.parent(ref)}
	if req.Parent != "" {
		req.ParentTurn = s.step()
	}
	t, err := c.Start(ctx, req)
	if err != nil {
		return RunOutput{}, err
	}
	ref.Thread = t.ID
	out := RunOutput{Thread: ref.String(), Status: t.Status, Result: t.Result, Error: t.Error}
	if !in.Wait || t.Ended() {
		return out, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = c.Events(wctx, t.ID, 0, true, func(workflow.Event) error { return nil })
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return out, err
	}
	return s.outcome(ctx, ref, func(ctx context.Context) (*workflow.Thread, error) { return c.Thread(ctx, t.ID) })
}

func (s *server) runRemote(ctx context.Context, ref workflow.Ref, in WorkflowRunInput, wait time.Duration) (RunOutput, error) {
	c, err := s.remote(ref.Remote)
	if err != nil {
		return RunOutput{}, err
	}
	start := api.StartThread{Input: in.Input}
	if p, err := workflow.ParseRef(s.parent(ref)); err == nil && p.Thread != "" {
		// Inside a turn of a thread of this remote: its child.
		start.Parent = &api.StartParent{Thread: p.Thread, Turn: s.step()}
	}
	id, err := c.Start(ctx, ref.Workflow, start)
	if err != nil {
		return RunOutput{}, remoteUsage(err)
	}
	ref.Thread = id
	if !in.Wait {
		return RunOutput{Thread: ref.String(), Status: workflow.StatusRunning}, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = c.Events(wctx, id, 0, func(workflow.Event) error { return nil })
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return RunOutput{Thread: ref.String(), Status: workflow.StatusRunning}, fmt.Errorf("follow %s: %w", ref, err)
	}
	return s.outcome(ctx, ref, func(ctx context.Context) (*workflow.Thread, error) { return c.Thread(ctx, id) })
}

// outcome reads the thread as it is after the wait.
func (s *server) outcome(ctx context.Context, ref workflow.Ref, get func(context.Context) (*workflow.Thread, error)) (RunOutput, error) {
	t, err := get(ctx)
	if err != nil {
		return RunOutput{Thread: ref.String(), Status: workflow.StatusRunning}, err
	}
	return RunOutput{Thread: ref.String(), Status: t.Status, Result: t.Result, Error: t.Error}, nil
}

// parent is the thread a workflow started here is a child of: the turn's
// ($NERVE_THREAD) when it is on the same side as ref, else "".
func (s *server) parent(ref workflow.Ref) string {
	env := s.opts.Getenv("NERVE_THREAD")
	p, err := workflow.ParseRef(env)
	if env == "" || err != nil || p.Thread == "" || p.Remote != ref.Remote {
		return ""
	}
	return env
}
