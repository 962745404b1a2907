package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/nerve-agents/nerve/internal/telemetry"
)

// telemetryFlush bounds the wait for the collector at exit.
const telemetryFlush = 5 * time.Second

// startTelemetry exports traces when OTEL_EXPORTER_OTLP_ENDPOINT is set;
// the returned function flushes them (call it after the server stopped).
func startTelemetry(ctx context.Context, service string, log *slog.Logger) (func(), error) {
	shutdown, err := telemetry.Setup(ctx, service, log)
	if err != nil {
		return nil, err
	}
	if telemetry.Enabled() {
		log.Info("exporting traces over OTLP/HTTP", "service", service)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlush)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}, nil
}
