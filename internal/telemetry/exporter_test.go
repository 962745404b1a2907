package telemetry

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// collector decodes export requests with the generated OTLP types; status
// answers each request in turn (then 200).
func collector(t *testing.T, status ...int) (*httptest.Server, *atomic.Int32, chan *coltracepb.ExportTraceServiceRequest) {
	got := make(chan *coltracepb.ExportTraceServiceRequest, 10)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i < len(status) && status[i] != 200 {
			w.WriteHeader(status[i])
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			body, _ = gzip.NewReader(r.Body)
		}
		raw, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("undecodable export (%s): %v", r.Header.Get("Content-Type"), err)
		}
		if r.URL.Path != "/v1/traces" || r.Header.Get("X-Tenant") != "a b" {
			t.Errorf("path %s, headers %v", r.URL.Path, r.Header)
		}
		got <- &req
	}))
	t.Cleanup(srv.Close)
	return srv, &n, got
}

func TestExporterEncodesWhatTheSDKRecorded(t *testing.T) {
	srv, _, got := collector(t)
	exp, err := newExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/",
		"OTEL_EXPORTER_OTLP_HEADERS": "X-Tenant=a%20b", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer("scope-x")
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: 1})
	ctx, parent := tr.Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
	_, child := tr.Start(ctx, "child", trace.WithLinks(trace.Link{SpanContext: linked}), trace.WithAttributes(
		attribute.String("s", "v"), attribute.String("empty", ""), attribute.Int64("i", -3), attribute.Int("zero", 0),
		attribute.Float64("f", 0.25), attribute.Bool("b", true), attribute.Bool("no", false),
		attribute.StringSlice("ss", []string{"x", "y"}), attribute.Int64Slice("is", []int64{1, 2})))
	child.AddEvent("ev", trace.WithAttributes(attribute.Int("n", 7)))
	child.SetStatus(codes.Error, "boom")
	child.End()
	parent.SetStatus(codes.Ok, "")
	parent.End()
	tp.Shutdown(context.Background())

	spans := map[string]*tracepb.Span{}
	for range 2 {
		req := <-got
		rs := req.ResourceSpans[0]
		if rs.ScopeSpans[0].Scope.Name != "scope-x" || len(rs.Resource.Attributes) == 0 {
			t.Errorf("scope/resource: %v", rs)
		}
		for _, s := range rs.ScopeSpans[0].Spans {
			spans[s.Name] = s
		}
	}
	c, p := spans["child"], spans["parent"]
	csc := child.SpanContext()
	if c == nil || p == nil || string(c.ParentSpanId) != string(p.SpanId) || len(p.ParentSpanId) != 0 {
		t.Fatalf("spans: %v", spans)
	}
	if tid := csc.TraceID(); string(c.TraceId) != string(tid[:]) || p.Kind != tracepb.Span_SPAN_KIND_SERVER || c.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("ids or kinds: %v", c)
	}
	if c.StartTimeUnixNano == 0 || c.EndTimeUnixNano < c.StartTimeUnixNano || time.Since(time.Unix(0, int64(c.EndTimeUnixNano))) > time.Minute {
		t.Errorf("times: %d %d", c.StartTimeUnixNano, c.EndTimeUnixNano)
	}
	want := map[string]string{"s": `string_value:"v"`, "empty": `string_value:""`, "i": `int_value:-3`, "zero": `int_value:0`,
		"f": `double_value:0.25`, "b": `bool_value:true`, "no": `bool_value:false`}
	attrs := map[string]*commonpb.AnyValue{}
	for _, kv := range c.Attributes {
		attrs[kv.Key] = kv.Value
	}
	for k, w := range want {
		if g := attrs[k]; g == nil || g.Value == nil || compact(g.String()) != w {
			t.Errorf("attribute %s: %v, want %s", k, g, w)
		}
	}
	if ss := attrs["ss"].GetArrayValue().GetValues(); len(ss) != 2 || ss[1].GetStringValue() != "y" {
		t.Errorf("string slice: %v", attrs["ss"])
	}
	if is := attrs["is"].GetArrayValue().GetValues(); len(is) != 2 || is[0].GetIntValue() != 1 {
		t.Errorf("int slice: %v", attrs["is"])
	}
	if len(c.Events) != 1 || c.Events[0].Name != "ev" || c.Events[0].Attributes[0].Value.GetIntValue() != 7 {
		t.Errorf("events: %v", c.Events)
	}
	if len(c.Links) != 1 || c.Links[0].TraceId[0] != 9 || c.Links[0].SpanId[0] != 8 {
		t.Errorf("links: %v", c.Links)
	}
	if c.Status.Code != tracepb.Status_STATUS_CODE_ERROR || c.Status.Message != "boom" || p.Status.Code != tracepb.Status_STATUS_CODE_OK {
		t.Errorf("status: %v %v", c.Status, p.Status)
	}
}

// compact drops the spaces prototext may put after a colon.
func compact(s string) string {
	out := []rune{}
	for i, r := range s {
		if r == ' ' && i > 0 && s[i-1] == ':' {
			continue
		}
		out = append(out, r)
	}
	return string(out)
}

func TestExporterRetriesWhatMayPass(t *testing.T) {
	srv, n, got := collector(t, 503, 429, 200)
	exp, _ := newExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL + "/v1/traces",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "X-Tenant=a%20b"}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, s := tp.Tracer("t").Start(context.Background(), "x")
	s.End()
	tp.Shutdown(context.Background())
	if n.Load() != 3 || len(got) != 1 {
		t.Fatalf("%d requests, %d delivered", n.Load(), len(got))
	}

	srv, n, _ = collector(t, 400)
	exp, _ = newExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}))
	err := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{endedSpan()})
	if err == nil || n.Load() != 1 {
		t.Fatalf("400: %v after %d requests", err, n.Load())
	}
}

func endedSpan() sdktrace.ReadOnlySpan {
	var got sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanGrabber{&got}))
	_, s := tp.Tracer("t").Start(context.Background(), "x")
	s.End()
	return got
}

type spanGrabber struct{ got *sdktrace.ReadOnlySpan }

func (g spanGrabber) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (g spanGrabber) OnEnd(s sdktrace.ReadOnlySpan)                   { *g.got = s }
func (g spanGrabber) Shutdown(context.Context) error                  { return nil }
func (g spanGrabber) ForceFlush(context.Context) error                { return nil }

func TestExporterRefusesBadSettings(t *testing.T) {
	ok := "http://127.0.0.1:4318"
	for _, c := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": ok, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": ok, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": ok, "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": ok, "OTEL_EXPORTER_OTLP_HEADERS": "k=%zz"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": ok, "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": ok, "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
	} {
		_, err := newExporter(env(c))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%v: %v", c, err)
		}
		if c["OTEL_EXPORTER_OTLP_HEADERS"] != "" && ce != nil && ce.Value != "…" {
			t.Errorf("a header's value (maybe a secret) is echoed: %v", ce)
		}
	}
	if e, err := newExporter(env(nil)); e != nil || err != nil {
		t.Errorf("unset: %v %v", e, err)
	}
}
