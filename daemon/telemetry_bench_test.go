package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/nerve-agents/nerve/internal/telemetry"
)

// BenchmarkTurnTraced is BenchmarkTurn's local thread with traces
// exported to a collector on loopback that drops them: what tracing
// costs a turn when OTEL_EXPORTER_OTLP_ENDPOINT is set (BenchmarkTurn is
// the figure with it unset). Run with -benchtime 200x.
func BenchmarkTurnTraced(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer collector.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	shutdown, err := telemetry.Setup(context.Background(), "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer shutdown(context.Background())
	b.Run("local-thread", func(b *testing.B) { benchLocalThread(b, truePath, false) })
}
