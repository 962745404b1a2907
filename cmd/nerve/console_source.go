package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/console"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// consoleDaemon is what `nerve console` shows: the local daemon, read over
// its socket API, and the workflow definitions of nerve.yaml's
// directories.
type consoleDaemon struct {
	client *daemon.Client
	agent  string
	dirs   []string
}

func (d *consoleDaemon) Threads(ctx context.Context, f console.ThreadFilter) (*console.ThreadPage, error) {
	all, err := d.client.Threads(ctx, "", "", 0)
	if err != nil {
		return nil, err
	}
	waiting, err := d.waitingThreads(ctx)
	if err != nil {
		return nil, err
	}
	out := &console.ThreadPage{}
	var match []*workflow.Thread
	seen := map[string]bool{}
	for _, t := range all {
		if !seen[t.Workflow] {
			seen[t.Workflow] = true
			out.Workflows = append(out.Workflows, t.Workflow)
		}
		status := t.Status
		switch t.Status {
		case workflow.StatusRunning:
			out.Counts.Running++
			if waiting[t.ID] {
				out.Counts.Waiting++
				status = "waiting"
			}
		case workflow.StatusCompleted:
			out.Counts.Completed++
		case workflow.StatusFailed:
			out.Counts.Failed++
		case workflow.StatusCancelled:
			out.Counts.Cancelled++
		}
		if (f.Workflow == "" || t.Workflow == f.Workflow) && (f.Status == "" || t.Status == f.Status || status == f.Status) {
			match = append(match, t)
		}
	}
	slices.Sort(out.Workflows)
	from, to, more := f.Window(len(match))
	out.More = more
	for _, t := range match[from:to] {
		out.Threads = append(out.Threads, console.Summary(t, waiting[t.ID]))
	}
	return out, nil
}

func (d *consoleDaemon) Thread(ctx context.Context, id string) (*console.ThreadDetail, error) {
	var evs []workflow.Event
	err := d.client.Events(ctx, id, 0, false, func(e workflow.Event) error { evs = append(evs, e); return nil })
	if daemon.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no thread %s", console.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	t, err := d.client.Thread(ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := d.client.Messages(ctx, id, workflow.Filter{})
	if err != nil {
		return nil, err
	}
	out := &console.ThreadDetail{Thread: *t, Messages: msgs, Events: evs, Children: d.children(ctx, t.Children)}
	for _, w := range t.Waiting {
		out.Waiting = append(out.Waiting, console.NewInboxItem(w))
	}
	for _, p := range t.Pending {
		out.Turns = append(out.Turns, console.QueuedTurn{Thread: id, Workflow: t.Workflow, Role: p.Role, Step: p.Step,
			State: "running", Agent: d.agent, Attempt: 1, QueuedAt: t.UpdatedAt})
	}
	return out, nil
}

func (d *consoleDaemon) Follow(ctx context.Context, id string, after uint64, fn func(workflow.Event) error) error {
	return d.client.Events(ctx, id, after, true, fn)
}

func (d *consoleDaemon) Workflows(context.Context) ([]console.Workflow, error) {
	var out []console.Workflow
	for _, e := range workflow.Discover(d.dirs) {
		w := console.Workflow{Name: e.Name}
		if e.Def == nil {
			w.Err = firstLine(e.Err.Error())
			out = append(out, w)
			continue
		}
		def := e.Def
		w.Description, w.Binding, w.Source = def.Description, def.Binding, string(def.Source)
		for name, r := range def.Roles {
			cr := console.Role{Name: name, Adapter: r.Adapter}
			if r.Meta != nil {
				b, _ := json.MarshalIndent(r.Meta, "", "  ")
				cr.Meta = string(b)
			}
			w.Roles = append(w.Roles, cr)
		}
		slices.SortFunc(w.Roles, func(a, b console.Role) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, w)
	}
	return out, nil
}

// Agents is this machine's one agent: the daemon.
func (d *consoleDaemon) Agents(ctx context.Context) ([]console.Agent, error) {
	st, err := d.client.Status(ctx)
	if err != nil {
		return nil, err
	}
	return []console.Agent{{Name: d.agent, LastSeen: time.Now(), TurnsHeld: len(st.ActiveTurns) + st.ClaimedSlots,
		Capacity: st.Capacity, EnrolledAt: st.StartedAt}}, nil
}

// Queue is what runs now: a daemon queues nothing, it runs each turn as
// its thread assigns it.
func (d *consoleDaemon) Queue(ctx context.Context) ([]console.QueuedTurn, error) {
	st, err := d.client.Status(ctx)
	if err != nil {
		return nil, err
	}
	out := []console.QueuedTurn{}
	for _, a := range st.ActiveTurns {
		thread, wf := a.Thread, ""
		if i := strings.LastIndexByte(a.Thread, '#'); i >= 0 {
			wf, thread = a.Thread[:i], a.Thread[i+1:]
		}
		out = append(out, console.QueuedTurn{Turn: fmt.Sprintf("%s.%d", thread, a.Step), Thread: thread, Workflow: wf,
			Role: a.Role, State: "running", Agent: d.agent, Step: a.Step, Attempt: 1, QueuedAt: a.StartedAt})
	}
	slices.SortFunc(out, func(a, b console.QueuedTurn) int { return a.QueuedAt.Compare(b.QueuedAt) })
	return out, nil
}

// Usage asks the daemon as `nerve usage` does: the same rollup.
func (d *consoleDaemon) Usage(ctx context.Context, q usage.Query) (*usage.Report, error) {
	return d.client.Usage(ctx, q)
}
