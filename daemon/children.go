package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// runChild is a child-workflow turn of a local thread: it starts a local
// child thread (once: after a restart it finds the one it started), waits
// for it to end, and returns its result or error as the step's message.
// A child that cannot start at all is an ErrorKindSpawn message, which
// fails the parent.
func (r *runner) runChild(ctx context.Context, t *workflow.Thread, turn workflow.Turn) workflow.Message {
	id, err := r.d.store.ChildAt(t.ID, turn.Step)
	if err != nil {
		return spawnFailed(err)
	}
	if id == "" {
		parent := &workflow.Parent{Ref: workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String(), Thread: t.ID, Step: turn.Step}
		child, err := r.startChild(ctx, t, parent, turn.Workflow, turn.Input)
		if err != nil {
			return spawnFailed(err)
		}
		id = child.ID
	}
	for {
		changed := r.d.store.Changed(id)
		c, err := r.d.store.Thread(id)
		if err != nil {
			return spawnFailed(fmt.Errorf("read child %s: %w", id, err))
		}
		if c.Ended() {
			return childMessage(c)
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), workflow.ErrCancelled) {
				r.cancel(id)
			}
			return workflow.Message{} // a shutdown: the child resumes too, and this wait
		case <-changed:
		}
	}
}

func spawnFailed(err error) workflow.Message {
	return workflow.Message{Error: &workflow.MessageError{Kind: workflow.ErrorKindSpawn, Message: err.Error()}}
}

// startChild starts a child of parent thread t: a local workflow found in
// the directory t's definition came from, else the configured ones; its
// depth checked against daemon.max_spawn_depth.
func (r *runner) startChild(ctx context.Context, t *workflow.Thread, link *workflow.Parent, name string, input map[string]any) (*workflow.Thread, error) {
	cfg := r.d.config()
	if err := workflow.CheckDepth(t.Depth, cfg.Daemon.MaxSpawnDepth); err != nil {
		return nil, err
	}
	def, err := r.childDefinition(t, name)
	if err != nil {
		return nil, err
	}
	if err := checkRunnable(def, cfg); err != nil {
		return nil, fmt.Errorf("child workflow %s: %w", name, err)
	}
	in, err := def.CheckInputs(input)
	if err != nil {
		return nil, fmt.Errorf("child workflow %s: %w", name, err)
	}
	ws, err := workspaceRequest(def, StartRequest{Workdir: t.Workdir})
	if err != nil {
		return nil, fmt.Errorf("child workflow %s: %w", name, err)
	}
	defs := t.Defs
	if def.File != "" {
		defs = filepath.Dir(def.File)
	}
	child, err := r.start(ctx, def, threadSpec{Input: in, Workdir: t.Workdir, Workspace: ws,
		Parent: link, Depth: t.Depth + 1, Defs: defs})
	if err != nil {
		return nil, fmt.Errorf("child workflow %s: %w", name, err)
	}
	r.d.log.Info("child thread started", "parent", t.ID, "child", child.ID, "workflow", name)
	return child, nil
}

func (r *runner) childDefinition(t *workflow.Thread, name string) (*workflow.Definition, error) {
	dirs := r.d.config().Workflows
	if t.Defs != "" {
		dirs = append([]string{t.Defs}, dirs...)
	}
	return workflow.Find(dirs, name)
}

// childMessage is what an ended child gives its parent's step: its result
// (as text, and as meta when it is structured), or its error.
func childMessage(c *workflow.Thread) workflow.Message {
	m := workflow.Message{Child: workflow.Ref{Workflow: c.Workflow, Thread: c.ID}.String()}
	if c.Usage.Messages > 0 {
		tot := c.Usage
		m.ChildUsage = &tot // counts in the parent's totals
	}
	if c.Status != workflow.StatusCompleted {
		m.Error = &workflow.MessageError{Kind: workflow.ErrorKindChild,
			Message: fmt.Sprintf("child %s %s: %s", m.Child, c.Status, c.Error)}
		return m
	}
	switch v := c.Result.(type) {
	case nil:
	case string:
		m.Content = v
	default:
		b, _ := json.Marshal(v)
		m.Content, m.Meta = string(b), v
	}
	return m
}

// cancelChildren cancels a thread's running children (and theirs).
func (r *runner) cancelChildren(id string) {
	cs, err := r.d.store.Children(id)
	if err != nil {
		r.d.log.Warn("list children to cancel", "thread", id, "err", err)
	}
	for _, c := range cs {
		if ct, err := r.d.store.Thread(c.ID); err == nil && !ct.Ended() {
			r.cancel(c.ID)
		}
	}
}

// childSummary counts a thread's children by status; nil when it has none.
func (d *Daemon) childSummary(id string) *workflow.Children {
	cs, err := d.store.Children(id)
	if err != nil || len(cs) == 0 {
		return nil
	}
	sum := &workflow.Children{Counts: map[string]int{}, Refs: make([]string, 0, len(cs))}
	for _, c := range cs {
		ct, err := d.store.Thread(c.ID)
		if errors.Is(err, store.ErrNotFound) || err != nil {
			continue
		}
		sum.Counts[ct.Status]++
		sum.Refs = append(sum.Refs, workflow.Ref{Workflow: ct.Workflow, Thread: ct.ID}.String())
	}
	return sum
}

// parentOf resolves the thread an agent starting a workflow from inside a
// turn belongs to: a running local thread, not too deep for a child.
func (d *Daemon) parentOf(ref string, turn int) (*workflow.Parent, int, error) {
	pr, err := workflow.ParseRef(ref)
	if err != nil || pr.Thread == "" || pr.Remote != "" {
		return nil, 0, usage(fmt.Sprintf("parent %q is not a local thread ref (WORKFLOW#thread-N)", ref), "")
	}
	t, err := d.store.Thread(pr.Thread)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, usage(fmt.Sprintf("parent thread %s does not exist here", pr.Thread), "")
	}
	if err != nil {
		return nil, 0, err
	}
	if t.Ended() {
		return nil, 0, usage(fmt.Sprintf("parent thread %s already ended (%s)", t.ID, t.Status), "")
	}
	if err := workflow.CheckDepth(t.Depth, d.config().Daemon.MaxSpawnDepth); err != nil {
		return nil, 0, err
	}
	if turn < 0 || turn > t.Step {
		turn = 0 // not a step of this thread: the trace says no step
	}
	// An agent's child waits for nothing at the parent: step 0 in the link.
	return &workflow.Parent{Ref: workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String(), Thread: t.ID, Turn: turn}, t.Depth + 1, nil
}
