package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracer is nil until Setup found an endpoint: the hooks test it first.
var tracer atomic.Pointer[trace.Tracer]

// Enabled reports whether spans are being exported.
func Enabled() bool { return tracer.Load() != nil }

func get() trace.Tracer {
	if p := tracer.Load(); p != nil {
		return *p
	}
	return nil
}

// ConfigError is an OTEL_* variable that cannot be used: a configuration
// error (exit 2), said before anything starts.
type ConfigError struct{ Var, Value, Why string }

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Why)
}
func (e *ConfigError) ExitCode() int { return 2 }
func (e *ConfigError) Hint() string {
	return "give an OTLP/HTTP collector's base URL, e.g. http://127.0.0.1:4318, or unset it"
}

// Setup starts exporting when the environment names an OTLP endpoint and
// returns the function that flushes and stops it (a no-op otherwise).
// service is the default service.name; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it, and the exporter honours the
// other OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression).
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	getenv := os.Getenv // the exporter reads the same variables
	none := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return none, nil
	}
	set := false
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		raw := getenv(v)
		if raw == "" {
			continue
		}
		if err := checkEndpoint(raw); err != nil {
			return none, &ConfigError{Var: v, Value: raw, Why: err.Error()}
		}
		set = true
	}
	if !set {
		return none, nil
	}
	if p := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL") + getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")); p != "" &&
		!strings.HasPrefix(p, "http/protobuf") {
		return none, &ConfigError{Var: "OTEL_EXPORTER_OTLP_PROTOCOL", Value: p, Why: "nerve exports OTLP over HTTP only (http/protobuf)"}
	}
	exp, err := otlptracehttp.New(ctx) // reads the OTEL_EXPORTER_OTLP_* variables itself
	if err != nil {
		return none, fmt.Errorf("start the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(semconv.ServiceName(service)))
	if err == nil {
		res, err = resource.Merge(res, envResource())
	}
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(ids{}))
	t := tp.Tracer("github.com/nerve-agents/nerve")
	tracer.Store(&t)
	return func(ctx context.Context) error {
		tracer.Store(nil)
		return tp.Shutdown(ctx) // flushes what is batched
	}, nil
}

// envResource is OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which
// win over the default service name.
func envResource() *resource.Resource {
	r, err := resource.New(context.Background(), resource.WithFromEnv())
	if err != nil {
		return resource.Empty()
	}
	return r
}

// checkEndpoint refuses what the exporter would only log about later.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("want an http:// or https:// URL")
	case u.Host == "":
		return fmt.Errorf("the URL has no host")
	}
	return nil
}
