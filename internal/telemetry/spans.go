package telemetry

import (
	"cmp"
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/nerve-agents/nerve/internal/usage"
)

// TurnInfo is what a turn's span says of it.
type TurnInfo struct {
	Thread, Workflow, Role, Agent, Adapter string
	Step                                   int
	// Remote and Turn name a remote thread's remote and Khala's turn id.
	Remote, Turn string
	// Kind is who answers (nerve.turn_kind): KindAgent when empty.
	Kind string
	// Child is the workflow a child turn runs (its span is "child NAME").
	Child string
}

// Kinds of turn (nerve.turn_kind).
const (
	KindAgent = "agent" // an adapter runs it
	KindHuman = "human" // a person answers it
	KindChild = "child" // a child workflow's thread answers it
)

// Turn is a running turn's span; nil when telemetry is off, and then its
// methods do nothing.
type Turn struct{ span trace.Span }

// StartTurn starts the span of a turn of the thread keyed key. A local
// turn is a child of its thread's root span (ThreadEnded exports it); a
// remote turn is a root in its thread's trace, and Khala's handler spans
// come under it through traceparent.
func StartTurn(ctx context.Context, key string, local bool, info TurnInfo) (context.Context, *Turn) {
	tr := get()
	if tr == nil {
		return ctx, nil
	}
	tid, sid := ThreadIDs(key)
	if local {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	} else {
		ctx = context.WithValue(ctx, forcedKey{}, &forced{trace: tid})
	}
	kind, name := cmp.Or(info.Kind, KindAgent), "turn "+info.Role
	attrs := []attribute.KeyValue{
		attribute.String("nerve.thread", info.Thread), attribute.String("nerve.workflow", info.Workflow),
		attribute.Int("nerve.step", info.Step), attribute.String("nerve.turn_kind", kind),
	}
	switch kind {
	case KindAgent:
		attrs = append(attrs, attribute.String("nerve.role", info.Role), attribute.String("nerve.agent", info.Agent),
			attribute.String("nerve.adapter", info.Adapter))
	case KindHuman:
		attrs = append(attrs, attribute.String("nerve.role", info.Role)) // who answered: AnsweredBy
	case KindChild:
		name = "child " + info.Child
		attrs = append(attrs, attribute.String("nerve.child_workflow", info.Child))
	}
	if info.Remote != "" {
		attrs = append(attrs, attribute.String("nerve.remote", info.Remote), attribute.String("nerve.turn", info.Turn))
	}
	ctx, span := tr.Start(ctx, name, trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	// Spans started below this one are not roots; drop the forced ids.
	ctx = context.WithValue(ctx, forcedKey{}, (*forced)(nil))
	return ctx, &Turn{span: span}
}

// Outcomes of a turn (nerve.outcome).
const (
	OutcomeAnswered    = "answered"    // an answer without error
	OutcomeError       = "error"       // an answer with an error of error.type
	OutcomeInterrupted = "interrupted" // no answer: shutdown, claim lost, cancelled
)

// End ends the turn's span with its usage and error (errKind "" for
// none). Call Interrupted instead when there is no answer.
func (t *Turn) End(u *usage.Usage, errKind, errMsg string) {
	if t == nil {
		return
	}
	t.span.SetAttributes(usageAttrs(u)...)
	if errKind != "" {
		t.span.SetAttributes(attribute.String("nerve.outcome", OutcomeError), attribute.String("error.type", errKind))
		t.span.SetStatus(codes.Error, errMsg)
	} else {
		t.span.SetAttributes(attribute.String("nerve.outcome", OutcomeAnswered))
	}
	t.span.End()
}

// AnsweredBy names who answered a person's turn (nerve.agent), or the
// child thread that answered a child turn (nerve.child, its ref), once
// known.
func (t *Turn) AnsweredBy(agent, child string) {
	if t == nil {
		return
	}
	if agent != "" {
		t.span.SetAttributes(attribute.String("nerve.agent", agent))
	}
	if child != "" {
		t.span.SetAttributes(attribute.String("nerve.child", child))
	}
}

// Interrupted ends the span of a turn that has no answer.
func (t *Turn) Interrupted(why string) {
	if t == nil {
		return
	}
	t.span.SetAttributes(attribute.String("nerve.outcome", OutcomeInterrupted), attribute.String("nerve.interrupted", why))
	t.span.End()
}

// usageAttrs reads a turn's usage: the one place that knows its fields.
// What the adapter did not report is left out rather than said as 0.
func usageAttrs(u *usage.Usage) []attribute.KeyValue {
	if u == nil {
		return nil
	}
	var out []attribute.KeyValue
	if u.Model != "" {
		out = append(out, attribute.String("gen_ai.response.model", u.Model))
	}
	for _, n := range []struct {
		key string
		v   *int64
	}{
		{"gen_ai.usage.input_tokens", u.InputTokens},
		{"gen_ai.usage.output_tokens", u.OutputTokens},
		{"gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens},
	} {
		if n.v != nil { // a figure the CLI did not give is left out, not sent as 0
			out = append(out, attribute.Int64(n.key, *n.v))
		}
	}
	if u.CostUSD != nil {
		out = append(out, attribute.Float64("nerve.cost_usd", *u.CostUSD))
	}
	return out
}

// ThreadInfo is what a thread's root span says of it.
type ThreadInfo struct {
	Thread, Workflow, Status, Error string
	Start, End                      time.Time
	// Parent is a child thread's parent: its key and ref. A child is a
	// trace of its own, linked to its parent's root span.
	ParentKey, ParentRef string
}

// ThreadEnded exports the root span of an ended thread keyed key, with
// the ids its turns' spans already name as their parent.
func ThreadEnded(key string, info ThreadInfo) {
	tr := get()
	if tr == nil {
		return
	}
	tid, sid := ThreadIDs(key)
	ctx := context.WithValue(context.Background(), forcedKey{}, &forced{trace: tid, span: sid})
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithTimestamp(info.Start),
		trace.WithAttributes(attribute.String("nerve.thread", info.Thread), attribute.String("nerve.workflow", info.Workflow),
			attribute.String("nerve.status", info.Status))}
	if info.ParentKey != "" {
		ptid, psid := ThreadIDs(info.ParentKey)
		opts = append(opts, trace.WithAttributes(attribute.String("nerve.parent", info.ParentRef)),
			trace.WithLinks(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: ptid, SpanID: psid, TraceFlags: trace.FlagsSampled})}))
	}
	_, span := tr.Start(ctx, "thread "+info.Workflow, opts...)
	if info.Error != "" {
		span.SetStatus(codes.Error, info.Error)
	}
	span.End(trace.WithTimestamp(info.End))
}

var noEnd = func(error) {}

// StartAdapter starts the span of an adapter's run under the turn's; the
// returned function ends it with the run's error.
func StartAdapter(ctx context.Context, adapter string) (context.Context, func(error)) {
	tr := get()
	if tr == nil {
		return ctx, noEnd
	}
	ctx, span := tr.Start(ctx, "adapter "+adapter, trace.WithAttributes(attribute.String("nerve.adapter", adapter)))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
