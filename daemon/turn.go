package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/internal/telemetry"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/workflow"
)

// newExecutor is the turn executor of d, local and remote turns alike: it
// works with the daemon's config, snapshots, process records and active
// turns, and records detections in the daemon's store.
func newExecutor(d *Daemon, r *runner) *reflex.Executor {
	return reflex.NewExecutor(reflex.Deps{
		Config:     d.config,
		Executable: d.opts.Executable,
		Home:       d.paths.Home,
		Snapshots:  r.snaps,
		Procs:      r,
		Tracker:    r,
		Log:        d.log,
		Workspaces: r.ws,
		Scratch:    r.scratch,
		Gate:       d.gate,
		// The network proxy and the per-turn socket.
		TurnServices: turnServices(d, r),
	})
}

// runTurn runs one turn of a local thread through its role's adapter. It
// is the engine's TurnFunc: failures come back as a message with Error.
func (r *runner) runTurn(ctx context.Context, t *workflow.Thread, d *workflow.Definition, turn workflow.Turn, history []workflow.Message) workflow.Message {
	if r.isDraining() {
		// Shutting down: start nothing new. The turn stays pending and
		// runs when the daemon starts again.
		<-ctx.Done()
		return workflow.Message{}
	}
	switch {
	case turn.IsChild():
		return r.spanned(ctx, t, turn, telemetry.KindChild, func(ctx context.Context) workflow.Message {
			return r.runChild(ctx, t, turn)
		})
	case d.IsHuman(turn.Role):
		return r.spanned(ctx, t, turn, telemetry.KindHuman, func(ctx context.Context) workflow.Message {
			return r.waitHuman(ctx, t, d, turn, history)
		})
	}
	role := d.Roles[turn.Role]
	agent := r.d.config().Agent.Name // the name the turn started under
	ref := workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String()
	// The thread's workspace is read before the turn: the engine moves
	// its head only between rounds.
	ctx, span := r.startLocalSpan(ctx, t, turn, agent, role.Adapter)
	a, ok := r.exec.Run(ctx, &reflex.Turn{
		Thread: t.ID, Ref: ref, Key: t.ID, Step: turn.Step, Role: turn.Role, Adapter: role.Adapter,
		Prompt:  workflow.Prompt(d, ref, turn, history),
		Workdir: t.Workdir, History: history,
		Workspace: turnWorkspace(t, t.ID, turn.Step, len(t.Pending) > 1),
		RoleDef:   func() *workflow.Role { return role },
	})
	if !ok {
		span.Interrupted("stopped")
		return workflow.Message{}
	}
	m := workflow.Message{Agent: agent, Adapter: role.Adapter,
		Content: a.Content, Meta: a.Meta, Usage: a.Usage, Error: a.Error, Commit: a.Commit, Changes: a.Changes}
	endSpan(span, m)
	return m
}

// TurnStarted and TurnEnded keep the active turns (daemon status, the
// graceful shutdown's wait).
func (r *runner) TurnStarted(t *reflex.Turn, at time.Time) {
	r.setActive(ActiveTurn{Thread: t.Thread, Step: t.Step, Role: t.Role, Adapter: t.Adapter, StartedAt: at}, true)
}

func (r *runner) TurnEnded(t *reflex.Turn) {
	r.setActive(ActiveTurn{Thread: t.Thread, Step: t.Step}, false)
}

// Detected records a detection among its thread's events: a local
// thread's log shows it, and so does the daemon's record of a remote
// thread it ran a turn of.
func (r *runner) Detected(t *reflex.Turn, e workflow.Event) {
	if err := r.d.store.AppendEvents(t.Thread, e); err != nil {
		r.d.log.Warn("record detection", "thread", t.Thread, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.active[activeKey(t.Thread, t.Step)]; ok {
		a.Detections = append(slices.Clip(a.Detections), fmt.Sprintf("%s: %s", e.Status, e.Message))
		r.active[activeKey(t.Thread, t.Step)] = a
	}
}
