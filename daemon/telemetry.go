package daemon

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/nerve-agents/nerve/internal/telemetry"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// hostname places a local thread's trace: thread ids repeat across
// NERVE_HOMEs and machines.
var hostname = sync.OnceValue(func() string { h, _ := os.Hostname(); return h })

// localTraceKey names a local thread for its trace id (package telemetry).
func (r *runner) localTraceKey(thread string) string {
	return telemetry.ThreadKey(hostname()+":"+r.d.paths.Home, thread)
}

// startLocalSpan starts a local agent turn's span under its thread's.
func (r *runner) startLocalSpan(ctx context.Context, t *workflow.Thread, turn workflow.Turn, agent, adapterName string) (context.Context, *telemetry.Turn) {
	if !telemetry.Enabled() {
		return ctx, nil
	}
	return telemetry.StartTurn(ctx, r.localTraceKey(t.ID), true, telemetry.TurnInfo{
		Thread: t.ID, Workflow: t.Workflow, Role: turn.Role, Agent: agent, Adapter: adapterName, Step: turn.Step})
}

// spanned runs a local turn no adapter runs (kind: a person's or a child
// workflow's) under a span of its own, as an agent's turn has: a thread's
// trace shows every step, whoever answers it.
func (r *runner) spanned(ctx context.Context, t *workflow.Thread, turn workflow.Turn, kind string, run func(context.Context) workflow.Message) workflow.Message {
	if !telemetry.Enabled() {
		return run(ctx)
	}
	ctx, span := telemetry.StartTurn(ctx, r.localTraceKey(t.ID), true, telemetry.TurnInfo{
		Thread: t.ID, Workflow: t.Workflow, Role: turn.Role, Step: turn.Step, Kind: kind, Child: turn.Workflow})
	m := run(ctx)
	if ctx.Err() != nil { // not stored: on resume the turn waits again
		why := "stopped"
		if errors.Is(context.Cause(ctx), workflow.ErrCancelled) {
			why = "cancelled"
		}
		span.Interrupted(why)
		return m
	}
	span.AnsweredBy(m.Agent, m.Child)
	endSpan(span, m)
	return m
}

// startRemoteSpan starts a remote turn's span in its thread's trace,
// keyed by the Khala URL this daemon uses.
func (r *runner) startRemoteSpan(ctx context.Context, baseURL, remoteName string, t api.Turn, adapterName string) (context.Context, *telemetry.Turn) {
	if !telemetry.Enabled() {
		return ctx, nil
	}
	return telemetry.StartTurn(ctx, telemetry.ThreadKey(baseURL, t.Thread), false, telemetry.TurnInfo{
		Thread: t.Thread, Workflow: t.Workflow, Role: t.Role, Agent: r.d.config().Agent.Name, Adapter: adapterName,
		Step: t.Step, Remote: remoteName, Turn: t.Turn})
}

// endSpan ends a turn's span with its answer.
func endSpan(s *telemetry.Turn, m workflow.Message) {
	if s == nil {
		return
	}
	var kind, msg string
	if m.Error != nil {
		kind, msg = m.Error.Kind, m.Error.Message
	}
	s.End(m.Usage, kind, msg)
}

// threadSpan exports an ended local thread's root span.
func (r *runner) threadSpan(t *workflow.Thread) {
	if !telemetry.Enabled() {
		return
	}
	info := telemetry.ThreadInfo{Thread: t.ID, Workflow: t.Workflow,
		Status: t.Status, Error: t.Error, Start: t.CreatedAt, End: t.EndedAt}
	if p := t.Parent; p != nil {
		info.ParentKey, info.ParentRef = r.localTraceKey(p.Thread), p.Ref
	}
	telemetry.ThreadEnded(r.localTraceKey(t.ID), info)
}
