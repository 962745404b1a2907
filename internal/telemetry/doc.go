// Package telemetry exports OpenTelemetry traces over OTLP/HTTP when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set: a
// thread is a trace, a turn a span, the adapter's run and Khala's HTTP
// handlers child spans, joined across processes by W3C traceparent.
//
// Unset, Setup installs nothing and every hook here is one atomic load
// that returns at once: no spans, no headers, no wrapped writers.
//
// A thread's trace id is derived, not stored: the first 16 bytes of
// SHA-256 over the thread's key (ThreadKey), and its root span id the
// next 8. A local thread's key is the daemon's NERVE_HOME on this host
// with the thread id; a remote thread's is the Khala URL the daemon uses
// with the thread id. So every turn of a thread lands in one trace
// across daemon restarts without a schema change; daemons that reach one
// Khala under different URLs put its turns in different traces.
//
// The SDK is go.opentelemetry.io/otel's; the OTLP/HTTP exporter is this
// package's own (exporter.go, otlp.go): otlptracehttp links the protobuf
// runtime and gRPC, whose package initialisation cost every nerve process
// (`nerve version`, `nerve thread messages` inside a turn) about 0.6 ms
// and the binary 6 MB, with traces on or off.
package telemetry
