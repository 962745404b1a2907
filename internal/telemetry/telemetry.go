package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
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
	return "fix " + e.Var + ", or unset it to export no traces"
}

// Setup starts exporting when the environment names an OTLP endpoint and
// returns the function that flushes and stops it (a no-op otherwise).
// service is the default service.name; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it, OTEL_TRACES_SAMPLER and
// OTEL_BSP_* tune the SDK, and export failures are logged to log.
func Setup(ctx context.Context, service string, log *slog.Logger) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")), "none") {
		return none, nil
	}
	exp, err := newExporter(os.Getenv)
	if err != nil || exp == nil {
		return none, err
	}
	if log == nil {
		log = slog.Default()
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("traces", "err", err) }))
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err == nil {
		res, err = resource.Merge(res, envResource()) // the environment's service name wins
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

// envResource is OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func envResource() *resource.Resource {
	r, err := resource.New(context.Background(), resource.WithFromEnv())
	if err != nil {
		return resource.Empty()
	}
	return r
}

// checkEndpoint refuses what could only fail later, span after span.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("want an http:// or https:// URL of an OTLP/HTTP collector, e.g. http://127.0.0.1:4318")
	case u.Host == "":
		return fmt.Errorf("the URL has no host")
	}
	return nil
}
