package main

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// gotSpan is one exported span as the receiver decoded it.
type gotSpan struct {
	Service, Name        string
	Trace, ID, Parent    string   // hex; Parent "" for a root
	Links                []string // hex TRACE/SPAN of each linked span
	Attrs                map[string]any
	StatusError          bool
	StatusMessage        string
	StartNanos, EndNanos uint64
}

// otlpReceiver is an OTLP/HTTP trace collector on loopback: it decodes
// each protobuf export request and keeps the spans.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []gotSpan
	bad   []string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &otlpReceiver{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(rc.export)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return rc
}

func (rc *otlpReceiver) export(w http.ResponseWriter, r *http.Request) {
	fail := func(why string) {
		rc.mu.Lock()
		rc.bad = append(rc.bad, why)
		rc.mu.Unlock()
		http.Error(w, why, http.StatusBadRequest)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		fail(r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type"))
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			fail(err.Error())
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		fail(err.Error())
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		fail("not an ExportTraceServiceRequest: " + err.Error())
		return
	}
	var got []gotSpan
	for _, rs := range req.ResourceSpans {
		service, _ := attrMap(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, decodeSpan(service, s))
			}
		}
	}
	rc.mu.Lock()
	rc.spans = append(rc.spans, got...)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func decodeSpan(service string, s *tracepb.Span) gotSpan {
	g := gotSpan{Service: service, Name: s.Name, Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
		Attrs: attrMap(s.Attributes), StartNanos: s.StartTimeUnixNano, EndNanos: s.EndTimeUnixNano}
	if len(s.ParentSpanId) > 0 {
		g.Parent = hex.EncodeToString(s.ParentSpanId)
	}
	for _, l := range s.Links {
		g.Links = append(g.Links, hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId))
	}
	if st := s.GetStatus(); st != nil {
		g.StatusError = st.Code == tracepb.Status_STATUS_CODE_ERROR
		g.StatusMessage = st.Message
	}
	return g
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		}
	}
	return m
}

// snapshot returns the spans so far and any request it refused.
func (rc *otlpReceiver) snapshot() ([]gotSpan, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]gotSpan(nil), rc.spans...), append([]string(nil), rc.bad...)
}

// find returns the spans of service whose name is name.
func findSpans(spans []gotSpan, service, name string) []gotSpan {
	var out []gotSpan
	for _, s := range spans {
		if s.Service == service && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
