package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// StartRequest is a new thread of a published workflow. Its parts are
// checked against the definition before (the HTTP shell does: input,
// webhook, workspace); the engine checks what needs the store.
type StartRequest struct {
	Workflow khaladb.WorkflowRecord
	Def      *workflow.Definition
	Input    map[string]any
	// Workspace, nil for none, has its branch or is given the default
	// one, the next free name past Taken (what the shared remote has).
	Workspace *workflow.Workspace
	Taken     []string
	Webhook   string
	Initiator string
	// Parent makes the thread a child of a running thread; MayAttach,
	// when not nil, refuses a parent the caller may not start one under.
	Parent    *api.StartParent
	MayAttach func(*khaladb.ThreadView) error
	// Priority orders the thread's turns in the queue (nil: 0).
	Priority *int
}

// Start creates a thread and routes its first step. Its first turns go,
// in the same commit, to long polls waiting here (handoff.go): a fleet's
// parked agents are not all woken to race for each new thread.
func (e *Engine) Start(ctx context.Context, req StartRequest) (khaladb.Thread, error) {
	def, ws := req.Def, req.Workspace
	id, err := e.store.NextThreadID(ctx)
	if err == nil {
		err = withBranch(ws, def, id, req.Taken)
	}
	var (
		parent *workflow.Parent
		depth  int
	)
	if err == nil && req.Parent != nil {
		parent, depth, err = e.startParent(ctx, req.Parent, id, def.Name, req.MayAttach)
	}
	if err != nil {
		return khaladb.Thread{}, err
	}
	var (
		c      *khaladb.ThreadChange
		handed *reservation
	)
	defer func() { handed.settle(false) }() // if CreateThread never returned
	err = e.routed(ctx, func(ids *reservedIDs) error {
		handed.settle(false) // an earlier try's promises
		handed = nil
		now := e.now()
		var err error
		c, err = startThread(ctx, def, req.Workflow.SourceHash, id, req.Input, ws, req.Webhook, req.Initiator, parent, depth, e.routing(ids), now)
		if err == nil && req.Priority != nil {
			withPriority(c, *req.Priority)
		}
		if err == nil {
			handed = e.handoffs.reserve(c, now)
			err = e.store.CreateThread(ctx, c)
		}
		return err
	})
	handed.settle(err == nil)
	handed = nil
	if err != nil {
		if parent != nil {
			e.markCancelled(context.WithoutCancel(ctx), parent.Thread, []string{id}) // it never started
		}
		return khaladb.Thread{}, err
	}
	e.obs.ThreadStarted()
	if c.Thread.Workspace == nil {
		e.handoffs.sawBare(c.Thread.ID) // its turns' claims need not read it
	}
	e.changed(c)
	return c.Thread, nil
}

// withBranch gives ws the default branch of thread when it names none:
// the next free name when the shared remote has it (taken).
func withBranch(ws *workflow.Workspace, def *workflow.Definition, thread string, taken []string) error {
	if ws == nil || ws.Branch != "" {
		return nil
	}
	ws.Branch = workflow.FreeBranch(workflow.DefaultBranch(def.Name, thread), taken)
	if err := workflow.CheckBranch(ws.Branch); err != nil {
		return badRequest("workspace.branch: the default %q is not a branch name git accepts (%s); give a branch", ws.Branch, err)
	}
	return nil
}

// startParent checks a new thread's parent and records the child in it
// before the child exists: a parent never misses a child it must cancel.
// It returns the child's Parent and depth.
func (e *Engine) startParent(ctx context.Context, req *api.StartParent, child, workflowName string, may func(*khaladb.ThreadView) error) (*workflow.Parent, int, error) {
	var p *workflow.Parent
	depth := 0
	err := e.store.UpdateThread(ctx, req.Thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		th := v.Thread
		if may != nil {
			if err := may(v); err != nil {
				return nil, err
			}
		}
		switch {
		case th.Ended():
			return nil, fmt.Errorf("%w: parent %s is %s; a child thread cannot start under it", khaladb.ErrThreadEnded, th.ID, th.Status)
		case req.Step < 0 || req.Step > th.Step:
			return nil, badRequest("parent.step %d: thread %s has steps 1 to %d", req.Step, th.ID, th.Step)
		case req.Turn < 0 || req.Turn > th.Step:
			return nil, badRequest("parent.turn %d: thread %s has steps 1 to %d", req.Turn, th.ID, th.Step)
		}
		if err := workflow.CheckDepth(th.Depth, e.cfg.MaxSpawnDepth); err != nil {
			return nil, &Error{Kind: KindTooDeep, Code: CodeTooDeep, Msg: err.Error()}
		}
		p, depth = &workflow.Parent{Ref: parentRef(th), Thread: th.ID, Step: req.Step}, th.Depth+1
		if req.Step == 0 {
			p.Turn = req.Turn
		}
		now := e.now()
		c := &khaladb.ThreadChange{Thread: th}
		c.Thread.Children = append(slices.Clone(th.Children), khaladb.ChildLink{Thread: child, Workflow: workflowName,
			Step: req.Step, Status: workflow.StatusRunning})
		c.Thread.UpdatedAt = now
		c.Events = []workflow.Event{{At: now, Type: workflow.EventChildStarted, Thread: th.ID, Step: p.ChildEventStep(),
			Message: workflowName + "#" + child}}
		return c, nil
	})
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("parent: unknown thread %q", req.Thread)
	}
	return p, depth, err
}
