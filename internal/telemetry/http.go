package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var traceContext propagation.TraceContext

// Inject puts the W3C traceparent of ctx's span on an outgoing request.
func Inject(ctx context.Context, h http.Header) {
	if get() == nil {
		return
	}
	traceContext.Inject(ctx, propagation.HeaderCarrier(h)) // nothing without a span
}

// Traceparent is the W3C traceparent of ctx's span, for a request sent
// later from another context (WithTraceparent); "" when telemetry is off
// or ctx has no span.
func Traceparent(ctx context.Context) string {
	if get() == nil {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx under the span a traceparent names (a remote
// parent): a request sent with it (Inject) continues that span's trace.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || get() == nil {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Handler gives every request to next a server span, under the caller's
// span when it sent a traceparent. Off, it returns next itself.
func Handler(service string, next http.Handler) http.Handler {
	if get() == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr := get()
		if tr == nil {
			next.ServeHTTP(w, r)
			return
		}
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tr.Start(ctx, service+" "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		sw := &StatusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		if r.Pattern != "" { // set by the mux: the route, not the ids in the path
			span.SetName(service + " " + r.Pattern)
			span.SetAttributes(attribute.String("http.route", r.Pattern))
		}
		status := sw.Status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// StatusWriter remembers the status a handler wrote (for spans, and
// Khala's /metrics); ResponseController reaches the writer below through
// Unwrap, and server-sent events flush through Flush.
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
