package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// runner runs the daemon's work, each piece in its own goroutine: its
// local threads (start, launch, resumeAll) and the remote turns its khala
// senses claim (RunTurn), both through one executor. It keeps what they
// share: the running turns and their adapters' processes, snapshots and
// histories, workspaces, worktrees and scratch directories.
type runner struct {
	d   *Daemon
	ctx context.Context // cancelled when running work must be killed

	wg       sync.WaitGroup
	mu       sync.Mutex
	threads  map[string]context.CancelCauseFunc
	active   map[string]ActiveTurn       // key thread/step
	waiting  map[string]workflow.Waiting // human turns, key thread/step
	groups   map[int]string              // running adapters' process groups: "thread-3 step 2"
	draining bool
	idle     chan struct{} // closed and replaced when active drops to 0
	snaps    *snapshots
	hist     *histories
	exec     *reflex.Executor
	ws       *workspace.Manager // threads' git workspaces
	trees    *cloudTrees        // cloud threads' worktrees kept here (cloudtrees.go)
	scratch  workspace.Scratch  // turns' directories when they have no workdir
	procs    *procSlots         // running adapters, for the next daemon after a crash
	sweeps   chan struct{}      // asks for a sweep of what outlived its turn (reaper.go)
}

func newRunner(d *Daemon, ctx context.Context) *runner {
	r := &runner{d: d, ctx: ctx, threads: map[string]context.CancelCauseFunc{},
		active: map[string]ActiveTurn{}, waiting: map[string]workflow.Waiting{}, groups: map[int]string{},
		idle:  make(chan struct{}),
		snaps: newSnapshots(d.paths.Snapshots()), ws: &workspace.Manager{Home: d.paths.Home, Deadlines: func() workspace.Deadlines { return gitDeadlines(d.config()) }},
		scratch: workspace.Scratch{Home: d.paths.Home}, trees: newCloudTrees(),
		procs: newProcSlots(filepath.Join(d.paths.Home, "procs")), sweeps: make(chan struct{}, 1)}
	r.hist = newHistories(r.snaps.remove)
	r.exec = newExecutor(d, r)
	return r
}

func (r *runner) engine() *workflow.Engine {
	return &workflow.Engine{Store: r.d.store, Turn: r.runTurn, Agent: r.d.config().Agent.Name, Merge: r.merge}
}

// threadSpec is what a new local thread starts with besides its
// definition.
type threadSpec struct {
	Input   map[string]any
	Workdir string
	// Workspace, when set, is made before the thread is stored.
	Workspace *workspace.Workspace
	// Parent and Depth link a child thread; Defs is where its own children's
	// definitions are looked for first (the directory of a definition file
	// it was started from).
	Parent *workflow.Parent
	Depth  int
	Defs   string
}

// start creates a thread of d and runs it in the background. A thread
// with a workspace has its branch made before it is stored; a workspace
// that cannot be made is a usage error and no thread starts.
func (r *runner) start(ctx context.Context, d *workflow.Definition, spec threadSpec) (*workflow.Thread, error) {
	r.mu.Lock()
	draining := r.draining
	r.mu.Unlock()
	if draining {
		return nil, errShuttingDown
	}
	now := time.Now().UTC()
	t := &workflow.Thread{Workflow: d.Name, Status: workflow.StatusRunning, Input: spec.Input, Workdir: spec.Workdir,
		Parent: spec.Parent, Depth: spec.Depth, Defs: spec.Defs, Source: d.Source, CreatedAt: now, UpdatedAt: now}
	var prepare func(*workflow.Thread) error
	if ws := spec.Workspace; ws != nil {
		prepare = func(t *workflow.Thread) error { return r.startWorkspace(ctx, t, *ws) }
	}
	if err := r.d.store.CreateThreadWith(t, prepare); err != nil {
		return nil, err
	}
	created := *t // the engine owns t from here on
	r.launch(d, t)
	return &created, nil
}

var errShuttingDown = errors.New("the daemon is shutting down")

// launch runs t's engine in a goroutine that outlives the request.
func (r *runner) launch(d *workflow.Definition, t *workflow.Thread) {
	ctx, cancel := context.WithCancelCause(r.ctx)
	r.mu.Lock()
	r.threads[t.ID] = cancel
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.threads, t.ID)
			r.mu.Unlock()
			cancel(nil)
		}()
		defer func() {
			if p := recover(); p != nil {
				r.d.log.Error("thread panicked", "thread", t.ID, "panic", p, "stack", string(debug.Stack()))
			}
		}()
		err := r.engine().Run(ctx, d, t)
		if t.Ended() {
			r.threadSpan(t)
			r.snaps.remove(t.ID)
			r.scratch.Remove(t.ID, 0)
			if t.Workspace != nil {
				r.removeWorktrees(t.ID)
			}
		}
		switch {
		case err == nil:
			r.d.log.Info("thread ended", "thread", t.ID, "workflow", t.Workflow, "status", t.Status)
		case ctx.Err() != nil:
			r.d.log.Info("thread paused for shutdown; it resumes on restart", "thread", t.ID)
		default:
			// The store failed under it: end it rather than leave it
			// running with nobody driving it.
			r.d.log.Error("thread stopped", "thread", t.ID, "err", err)
			r.fail(t, "internal error: "+err.Error())
		}
	}()
}

// resumeAll restarts every thread the store says is running: after a crash
// or a shutdown, each resumes at its interrupted turn.
func (r *runner) resumeAll() {
	ts, err := r.d.store.Threads("", workflow.StatusRunning, 0)
	if err != nil {
		r.d.log.Error("list running threads", "err", err)
		return
	}
	for _, t := range ts {
		d, err := workflow.ParseStored(t.Workflow+" (stored definition)", t.Source)
		if err != nil {
			// A thread that cannot resume must not stay running forever.
			r.fail(t, fmt.Sprintf("cannot resume: %v", err))
			continue
		}
		_ = r.d.store.AppendEvents(t.ID, workflow.Event{Type: workflow.EventResumed, At: time.Now().UTC(),
			Message: fmt.Sprintf("resumed at step %d", t.Step)})
		r.d.log.Info("resuming thread", "thread", t.ID, "workflow", t.Workflow, "step", t.Step)
		r.launch(d, t)
	}
}

func (r *runner) fail(t *workflow.Thread, reason string) {
	now := time.Now().UTC()
	t.Status, t.Error, t.Pending, t.EndedAt, t.UpdatedAt = workflow.StatusFailed, reason, nil, now, now
	err := r.d.store.Commit(workflow.Update{Thread: t, Events: []workflow.Event{{Type: workflow.EventThreadEnded,
		Status: t.Status, Message: reason, At: now}}})
	if err != nil {
		r.d.log.Error("fail thread", "thread", t.ID, "err", err)
	}
	r.scratch.Remove(t.ID, 0)
	if t.Workspace != nil {
		r.removeWorktrees(t.ID) // the branch and its commits stay
	}
}

// cancel stops a running thread; its adapters are killed and it ends as
// cancelled. It reports whether the thread was running here.
func (r *runner) cancel(id string) bool {
	r.cancelChildren(id)
	r.mu.Lock()
	cancel, ok := r.threads[id]
	r.mu.Unlock()
	if ok {
		cancel(workflow.ErrCancelled)
	}
	return ok
}

// wait blocks until every thread goroutine has returned.
func (r *runner) wait() { r.wg.Wait() }

func (r *runner) running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.threads)
}

// drain stops turns from starting; running ones go on.
func (r *runner) drain() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
}

func (r *runner) isDraining() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.draining
}

// waitIdle waits up to d for running turns to finish, or until hurry
// closes.
func (r *runner) waitIdle(d time.Duration, hurry <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		r.mu.Lock()
		n, idle := len(r.active), r.idle
		r.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-idle:
		case <-timer.C:
			return false
		case <-hurry:
			return false
		}
	}
}

func (r *runner) activeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active)
}

func (r *runner) activeTurns() []ActiveTurn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ActiveTurn, 0, len(r.active))
	for _, a := range r.active {
		out = append(out, a)
	}
	return out
}

func activeKey(thread string, step int) string { return thread + "/" + strconv.Itoa(step) }

func (r *runner) setActive(a ActiveTurn, on bool) {
	key := activeKey(a.Thread, a.Step)
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.active[key] = a
		return
	}
	delete(r.active, key)
	if len(r.active) == 0 {
		close(r.idle)
		r.idle = make(chan struct{})
	}
}
