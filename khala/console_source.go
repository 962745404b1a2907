package khala

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/console"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// consoleSource is what the web console reads of this server: its storage,
// directly, through the same interface the API handlers use.
type consoleSource struct {
	s *Server

	countsMu  sync.Mutex
	counts    console.Counts
	workflows []string // of every thread, counted with counts
	countsAt  time.Time
	counting  bool // a recount is under way
}

// countsTTL is how old the list's status counts get before they are
// counted again.
var countsTTL = 2 * time.Second

func (c *consoleSource) Threads(ctx context.Context, f console.ThreadFilter) (*console.ThreadPage, error) {
	counts, names, err := c.statusCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := &console.ThreadPage{Counts: counts, Workflows: names}
	waiting, err := c.waitingThreads(ctx)
	if err != nil {
		return nil, err
	}
	var ts []khaladb.Thread
	if f.Status == "waiting" {
		ts, err = c.threadsWaiting(ctx, waiting, f)
	} else {
		ts, err = c.s.store.Threads(ctx, khaladb.ThreadQuery{Workflow: f.Workflow, Status: f.Status, Limit: f.Page*f.PerPage + 1})
	}
	if err != nil {
		return nil, err
	}
	from, to, more := f.Window(len(ts))
	out.More = more
	for i := from; i < to; i++ {
		out.Threads = append(out.Threads, console.Summary(&ts[i].Thread, waiting[ts[i].ID]))
	}
	return out, nil
}

// statusCounts counts every thread by status and names the workflows
// they are of. Counting reads every thread, so a page gets the last count
// at once while a stale one (older than countsTTL) is redone in the
// background; only the first page waits.
func (c *consoleSource) statusCounts(ctx context.Context) (console.Counts, []string, error) {
	c.countsMu.Lock()
	have, fresh := !c.countsAt.IsZero(), time.Since(c.countsAt) < countsTTL
	start := have && !fresh && !c.counting
	if start {
		c.counting = true
	}
	n, names := c.counts, c.workflows
	c.countsMu.Unlock()
	if start {
		go func() {
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_, _, _ = c.recount(bg)
		}()
	}
	if have {
		return n, names, nil
	}
	return c.recount(ctx)
}

func (c *consoleSource) recount(ctx context.Context) (console.Counts, []string, error) {
	defer func() { c.countsMu.Lock(); c.counting = false; c.countsMu.Unlock() }()
	ts, err := c.s.store.Threads(ctx, khaladb.ThreadQuery{})
	if err != nil {
		return console.Counts{}, nil, err
	}
	waiting, err := c.waitingThreads(ctx)
	if err != nil {
		return console.Counts{}, nil, err
	}
	var n console.Counts
	seen := map[string]bool{}
	for _, t := range ts {
		seen[t.Workflow] = true
		switch t.Status {
		case workflow.StatusRunning:
			n.Running++
			if waiting[t.ID] {
				n.Waiting++
			}
		case workflow.StatusCompleted:
			n.Completed++
		case workflow.StatusFailed:
			n.Failed++
		case workflow.StatusCancelled:
			n.Cancelled++
		}
	}
	names := slices.Sorted(maps.Keys(seen))
	c.countsMu.Lock()
	c.counts, c.workflows, c.countsAt = n, names, time.Now()
	c.countsMu.Unlock()
	return n, names, nil
}

func (c *consoleSource) Thread(ctx context.Context, id string) (*console.ThreadDetail, error) {
	// The trace first: messages read after it are at least as new, and
	// the live stream resumes after the last event shown.
	evs, err := c.s.store.Events(ctx, id, 0, 0)
	if err != nil {
		return nil, err
	}
	v, err := c.s.store.Thread(ctx, id)
	if errors.Is(err, khaladb.ErrNotFound) {
		return nil, fmt.Errorf("%w: no thread %s", console.ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	tj, err := c.s.threadDetail(ctx, v)
	if err != nil {
		return nil, err
	}
	links, err := c.s.childLinks(ctx, v.Thread.Children)
	if err != nil {
		return nil, err
	}
	d := &console.ThreadDetail{Thread: *tj.Thread, Messages: khaladb.WithStepErrors(&v.Thread, v.Messages), Events: evs, Children: consoleChildren(links)}
	for _, w := range tj.Waiting {
		d.Waiting = append(d.Waiting, console.NewInboxItem(w))
	}
	for _, t := range v.Turns {
		d.Turns = append(d.Turns, queuedTurn(t))
	}
	return d, nil
}

func queuedTurn(t khaladb.Turn) console.QueuedTurn {
	return console.QueuedTurn{Turn: t.ID, Thread: t.Thread, Workflow: t.Workflow, Role: t.Role, State: t.State,
		Agent: t.Agent, Step: t.Step, Attempt: t.Attempt, Priority: t.Priority, QueuedAt: t.FirstQueued, LeaseExpires: t.LeaseExpires,
		Idle: t.State == khaladb.TurnQueued && t.Idle > 0 && t.IdleAt.IsZero()}
}

// Follow waits on the thread's wake-up topic as the API's event stream
// does, re-reading on a timer because hints may be lost.
func (c *consoleSource) Follow(ctx context.Context, id string, after uint64, fn func(workflow.Event) error) error {
	for {
		changed := c.s.store.Changed(khaladb.ThreadTopic(id))
		evs, err := c.s.store.Events(ctx, id, after, 500)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
			if e.Type == workflow.EventThreadEnded {
				return nil
			}
		}
		if len(evs) == 500 {
			continue
		}
		select {
		case <-changed:
		case <-time.After(c.s.opts.Recheck):
		case <-ctx.Done():
			return ctx.Err()
		case <-c.s.closing:
			return nil
		}
	}
}

func (c *consoleSource) Workflows(ctx context.Context) ([]console.Workflow, error) {
	recs, err := c.s.store.Workflows(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.Workflow, 0, len(recs))
	for _, rec := range recs {
		w := console.Workflow{Name: rec.Name, UpdatedAt: rec.UpdatedAt, UpdatedBy: rec.UpdatedBy, Binding: workflow.BindingCloud}
		if src, err := c.s.store.Source(ctx, rec.SourceHash); err == nil {
			w.Source = string(src)
		}
		def, err := c.s.engine.Definition(ctx, rec.SourceHash)
		if err != nil {
			w.Err = err.Error()
		} else {
			w.Description, w.Binding, w.Roles = def.Description, def.Binding, consoleRoles(def)
		}
		out = append(out, w)
	}
	return out, nil
}

// consoleRoles lists a definition's roles by name.
func consoleRoles(def *workflow.Definition) []console.Role {
	var out []console.Role
	for name, r := range def.Roles {
		cr := console.Role{Name: name, Adapter: r.Adapter}
		if r.Meta != nil {
			b, _ := json.MarshalIndent(r.Meta, "", "  ")
			cr.Meta = string(b)
		}
		out = append(out, cr)
	}
	slices.SortFunc(out, func(a, b console.Role) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// openTurns reads the open turns of every running thread, oldest first.
func (c *consoleSource) openTurns(ctx context.Context) ([]khaladb.Turn, error) {
	ts, err := c.s.store.Threads(ctx, khaladb.ThreadQuery{Status: workflow.StatusRunning})
	if err != nil {
		return nil, err
	}
	var out []khaladb.Turn
	for _, t := range ts {
		v, err := c.s.store.Thread(ctx, t.ID)
		if errors.Is(err, khaladb.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v.Turns...)
	}
	slices.SortFunc(out, func(a, b khaladb.Turn) int { return a.FirstQueued.Compare(b.FirstQueued) })
	return out, nil
}

func (c *consoleSource) Queue(ctx context.Context) ([]console.QueuedTurn, error) {
	ts, err := c.openTurns(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.QueuedTurn, 0, len(ts))
	for _, t := range ts {
		out = append(out, queuedTurn(t))
	}
	return out, nil
}

// Agents are the agents seen in the newest threads' traces and holding
// open turns. Khala keeps no agent list with a capacity (an agent says
// its capacity only by how much it claims), so that column is unknown.
func (c *consoleSource) Agents(ctx context.Context) ([]console.Agent, error) {
	byName := map[string]*console.Agent{}
	get := func(name string) *console.Agent {
		if byName[name] == nil {
			byName[name] = &console.Agent{Name: name, Capacity: -1}
		}
		return byName[name]
	}
	turns, err := c.openTurns(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range turns {
		if t.State == khaladb.TurnClaimed && t.Agent != "" {
			a := get(t.Agent)
			a.TurnsHeld++
			if t.ClaimedAt.After(a.LastSeen) {
				a.LastSeen = t.ClaimedAt
			}
		}
	}
	err = c.eachRecent(ctx, 200, true, func(v *khaladb.ThreadView, evs []workflow.Event) {
		for _, e := range evs {
			if e.Agent != "" && e.Agent != adminName {
				if a := get(e.Agent); e.At.After(a.LastSeen) {
					a.LastSeen = e.At
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]console.Agent, 0, len(byName))
	for _, a := range byName {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b console.Agent) int { return b.LastSeen.Compare(a.LastSeen) })
	return out, nil
}

// eachRecent calls fn with each of the newest n threads, and its trace
// when traces is set.
func (c *consoleSource) eachRecent(ctx context.Context, n int, traces bool, fn func(*khaladb.ThreadView, []workflow.Event)) error {
	ts, err := c.s.store.Threads(ctx, khaladb.ThreadQuery{Limit: n})
	if err != nil {
		return err
	}
	for _, t := range ts {
		v, err := c.s.store.Thread(ctx, t.ID)
		if errors.Is(err, khaladb.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var evs []workflow.Event
		if traces {
			if evs, err = c.s.store.Events(ctx, t.ID, 0, 0); err != nil {
				return err
			}
		}
		fn(v, evs)
	}
	return nil
}

func (c *consoleSource) Usage(ctx context.Context, q usage.Query) (*usage.Report, error) {
	return c.s.usageReport(ctx, q)
}
