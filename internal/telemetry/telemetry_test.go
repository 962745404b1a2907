package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
)

func TestThreadIDsAreDerivedAndDistinct(t *testing.T) {
	a1, s1 := ThreadIDs(ThreadKey("host:/home/a", "thread-1"))
	a2, s2 := ThreadIDs(ThreadKey("host:/home/a", "thread-1"))
	b, sb := ThreadIDs(ThreadKey("host:/home/b", "thread-1"))
	c, _ := ThreadIDs(ThreadKey("host:/home/a", "thread-2"))
	if a1 != a2 || s1 != s2 {
		t.Fatal("the same thread must give the same ids")
	}
	if a1 == b || a1 == c || s1 == sb {
		t.Fatal("another home or thread must give another trace")
	}
	if !a1.IsValid() || !s1.IsValid() {
		t.Fatal("invalid ids")
	}
}

type marker struct{}

func (*marker) ServeHTTP(http.ResponseWriter, *http.Request) {}

// Unset, the hooks do nothing: no span, no header, the handler itself.
func TestOffCostsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := Setup(context.Background(), "test", nil)
	if err != nil || Enabled() {
		t.Fatalf("unset: %v %v", err, Enabled())
	}
	defer shutdown(context.Background())
	ctx := context.Background()
	if c, turn := StartTurn(ctx, "k", true, TurnInfo{}); c != ctx || turn != nil {
		t.Fatal("a span while off")
	}
	h := http.Header{}
	Inject(ctx, h)
	if len(h) != 0 {
		t.Fatalf("headers while off: %v", h)
	}
	m := &marker{}
	if Handler("khala", m) != http.Handler(m) {
		t.Fatal("the handler is wrapped while off")
	}
	allocs := testing.AllocsPerRun(100, func() { hooksOnce(ctx, h) })
	if allocs != 0 {
		t.Fatalf("the hooks allocate %v times per turn while off", allocs)
	}
}

func TestSetupRefusesBadEndpoints(t *testing.T) {
	for _, bad := range []string{"localhost:4318", "ftp://x", "http://", "http://%zz"} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", bad)
		_, err := Setup(context.Background(), "test", nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.ExitCode() != 2 || Enabled() {
			t.Errorf("%q: %v", bad, err)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := Setup(context.Background(), "test", nil); err == nil || Enabled() {
		t.Errorf("grpc: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if _, err := Setup(context.Background(), "test", nil); err != nil || Enabled() {
		t.Errorf("OTEL_SDK_DISABLED: %v %v", err, Enabled())
	}
}

// On, a request carries the turn's traceparent and the handler's span is
// its child: checked through the W3C header the handler receives.
func TestOnPropagatesTraceparent(t *testing.T) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	shutdown, err := Setup(context.Background(), "test", nil)
	if err != nil || !Enabled() {
		t.Fatalf("set: %v", err)
	}
	defer shutdown(context.Background())
	ctx, turn := StartTurn(context.Background(), "k", false, TurnInfo{Role: "r"})
	h := http.Header{}
	Inject(ctx, h)
	tid, _ := ThreadIDs("k")
	want := "00-" + tid.String() + "-"
	if got := h.Get("traceparent"); len(got) != 55 || got[:36] != want {
		t.Fatalf("traceparent %q, want the thread's trace %s", got, want)
	}
	// Kept (an outbox item) and sent later from another context, it
	// names the same parent.
	kept := Traceparent(ctx)
	later := http.Header{}
	Inject(WithTraceparent(context.Background(), kept), later)
	if kept != h.Get("traceparent") || later.Get("traceparent") != kept {
		t.Fatalf("kept %q, sent later %q, want %q", kept, later.Get("traceparent"), h.Get("traceparent"))
	}
	turn.End(&usage.Usage{Model: "m", InputTokens: usage.Int(1)}, "", "")
	if Traceparent(context.Background()) != "" || WithTraceparent(context.Background(), "") != context.Background() {
		t.Fatal("no span: no traceparent")
	}
}

// hooksOnce is what one local turn calls of this package.
func hooksOnce(ctx context.Context, h http.Header) {
	c, turn := StartTurn(ctx, "k", true, TurnInfo{})
	c, end := StartAdapter(c, "a")
	end(nil)
	Inject(c, h)
	turn.End(nil, "", "")
}

func BenchmarkHooksOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	h := http.Header{}
	for b.Loop() {
		hooksOnce(ctx, h)
	}
}

// BenchmarkHooksOn is what the same hooks cost a turn with an endpoint
// set (spans made and queued; the export runs in the background).
func BenchmarkHooksOn(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer collector.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	shutdown, err := Setup(context.Background(), "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer shutdown(context.Background())
	ctx := context.Background()
	b.ReportAllocs()
	h := http.Header{}
	for b.Loop() {
		hooksOnce(ctx, h)
	}
}
