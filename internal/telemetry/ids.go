package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// ThreadKey names a thread for its trace id: where it lives (a daemon's
// NERVE_HOME on its host, or a Khala's URL) and its id there.
func ThreadKey(where, thread string) string { return where + "#" + thread }

// ThreadIDs are a thread's trace id and the span id of its root span,
// derived from its key so that every turn finds them without a record.
func ThreadIDs(key string) (trace.TraceID, trace.SpanID) {
	sum := sha256.Sum256([]byte("nerve thread\x00" + key))
	var t trace.TraceID
	var s trace.SpanID
	copy(t[:], sum[:16])
	copy(s[:], sum[16:24])
	return t, s
}

// forcedKey carries the ids a root span must take (forced).
type forcedKey struct{}

type forced struct {
	trace trace.TraceID
	span  trace.SpanID // zero: a random one
}

// ids generates random ids, or a thread's when the context says so:
// the SDK takes the trace id of a root span from its generator only.
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	f, _ := ctx.Value(forcedKey{}).(*forced)
	var t trace.TraceID
	if f != nil && f.trace.IsValid() {
		t = f.trace
	} else {
		binary.NativeEndian.PutUint64(t[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(t[8:], rand.Uint64())
	}
	if f != nil && f.span.IsValid() {
		return t, f.span
	}
	return t, randomSpan()
}

func (ids) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpan() }

func randomSpan() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.NativeEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
