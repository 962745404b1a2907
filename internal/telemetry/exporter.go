package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP collector as protobuf, configured
// by the standard OTEL_EXPORTER_OTLP_* variables (endpoint, headers,
// timeout, compression; the _TRACES_ forms win).
type exporter struct {
	url     string
	headers http.Header
	gzip    bool
	timeout time.Duration
	client  *http.Client
}

// newExporter reads the variables through getenv; what it cannot use is
// a ConfigError. It returns nil when no endpoint is set.
func newExporter(getenv func(string) string) (*exporter, error) {
	pick := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + name, v
		}
		return "OTEL_EXPORTER_OTLP_" + name, strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))
	}
	e := &exporter{headers: http.Header{}, timeout: 10 * time.Second}
	switch name, v := pick("ENDPOINT"); {
	case v == "":
		return nil, nil
	case checkEndpoint(v) != nil:
		return nil, &ConfigError{Var: name, Value: v, Why: checkEndpoint(v).Error()}
	case strings.HasSuffix(name, "TRACES_ENDPOINT"):
		e.url = v // the full URL, as the specification says
	default:
		e.url = strings.TrimRight(v, "/") + "/v1/traces"
	}
	if name, v := pick("PROTOCOL"); v != "" && v != "http/protobuf" {
		return nil, &ConfigError{Var: name, Value: v, Why: "nerve exports OTLP over HTTP only (http/protobuf)"}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parseHeaders(getenv(name), e.headers); err != nil {
			return nil, &ConfigError{Var: name, Value: "…", Why: err.Error()} // values may be secrets
		}
	}
	if name, v := pick("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, &ConfigError{Var: name, Value: v, Why: "want milliseconds, a positive integer"}
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch name, v := pick("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, &ConfigError{Var: name, Value: v, Why: "want gzip or none"}
	}
	e.client = &http.Client{}
	return e, nil
}

// parseHeaders adds "k1=v1,k2=v2" (values URL-encoded) to h.
func parseHeaders(raw string, h http.Header) error {
	for _, kv := range strings.Split(raw, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("want key=value pairs separated by commas")
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("header %s: %v", k, err)
		}
		h.Set(k, val)
	}
	return nil
}

func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body := encodeTraces(spans)
	if e.gzip {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(body)
		zw.Close()
		body = zb.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		retry, err := e.post(ctx, body)
		if err == nil || retry == 0 {
			return err
		}
		if retry > 0 { // the collector said how long
			wait = retry
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("export %d spans: %w (last: %v)", len(spans), ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// post sends one request; retry is nonzero when it may be tried again
// (the collector's Retry-After when it gave one, else -1).
func (e *exporter) post(ctx context.Context, body []byte) (retry time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range e.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		return -1, err // unreachable for now: try again
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return 0, nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		retry = -1
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retry = time.Duration(s) * time.Second
		}
		return retry, errors.New("collector: " + resp.Status)
	}
	return 0, fmt.Errorf("collector refused the spans: %s: %s", resp.Status, bytes.TrimSpace(msg))
}

func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}
