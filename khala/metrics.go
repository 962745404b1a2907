package khala

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// metrics are this process's counters, written in the Prometheus text
// format by hand: a few counters and two histograms do not need a client
// library. Each replica reports its own; gauges come from storage.
type metrics struct {
	threadsStarted  atomic.Int64
	turnsClaimed    atomic.Int64
	turnsAnswered   atomic.Int64
	turnsExpired    atomic.Int64
	turnsReleased   atomic.Int64
	turnsIdle       atomic.Int64
	webhooksSent    atomic.Int64
	webhooksFailed  atomic.Int64
	webhooksDropped atomic.Int64

	mu            sync.Mutex
	threadsEnded  map[string]int64 // by status
	requests      map[int]int64    // by HTTP status
	claimWait     *histogram
	turnDuration  *histogram
	claimRequests *histogram
}

func newMetrics() *metrics {
	return &metrics{
		threadsEnded: map[string]int64{},
		requests:     map[int]int64{},
		// Seconds a turn waited queued before an agent claimed it.
		claimWait: newHistogram(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600),
		// Seconds from claim to answer: how long agents work on a turn.
		turnDuration: newHistogram(0.01, 0.1, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200),
		// Seconds a claim request took, long poll included.
		claimRequests: newHistogram(0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1, 5, 30, 60),
	}
}

// The engine's Observer: what it did, counted here.

func (m *metrics) ThreadStarted() { m.threadsStarted.Add(1) }
func (m *metrics) TurnReleased()  { m.turnsReleased.Add(1) }
func (m *metrics) TurnExpired()   { m.turnsExpired.Add(1) }
func (m *metrics) TurnIdle()      { m.turnsIdle.Add(1) }

func (m *metrics) TurnClaimed(waited time.Duration) {
	m.turnsClaimed.Add(1)
	m.claimWait.observe(waited)
}

func (m *metrics) TurnAnswered(worked time.Duration) {
	m.turnsAnswered.Add(1)
	m.turnDuration.observe(worked)
}

func (m *metrics) ThreadEnded(status string) {
	m.mu.Lock()
	m.threadsEnded[status]++
	m.mu.Unlock()
}

func (m *metrics) request(status int) {
	m.mu.Lock()
	m.requests[status]++
	m.mu.Unlock()
}

// write prints the metrics; st are storage gauges, waiting the long polls
// waiting on this replica.
func (m *metrics) write(w io.Writer, st khaladb.Stats, waiting int) {
	gauge := func(name, help string, v int) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge("khala_queue_depth", "Turns queued and not claimed.", st.Queued)
	gauge("khala_turns_leased", "Turns claimed by an agent and not yet answered.", st.Claimed)
	gauge("khala_threads_running", "Threads not ended.", st.Running)
	gauge("khala_turns_waiting", "Human turns waiting for a person's answer.", st.Waiting)
	gauge("khala_claims_waiting", "Long polls waiting for a turn on this replica.", waiting)
	counter("khala_threads_started_total", "Threads started.", m.threadsStarted.Load())
	counter("khala_turns_claimed_total", "Turns leased to agents.", m.turnsClaimed.Load())
	counter("khala_turns_answered_total", "Turn responses accepted.", m.turnsAnswered.Load())
	fmt.Fprintf(w, "# HELP khala_turns_requeued_total Turns put back in the queue.\n# TYPE khala_turns_requeued_total counter\n")
	fmt.Fprintf(w, "khala_turns_requeued_total{reason=\"expired\"} %d\n", m.turnsExpired.Load())
	fmt.Fprintf(w, "khala_turns_requeued_total{reason=\"released\"} %d\n", m.turnsReleased.Load())
	counter("khala_turns_idle_total", "Idle events raised.", m.turnsIdle.Load())
	counter("khala_webhooks_delivered_total", "Webhook deliveries answered 2xx.", m.webhooksSent.Load())
	counter("khala_webhook_attempts_failed_total", "Webhook attempts that failed (retried).", m.webhooksFailed.Load())
	counter("khala_webhooks_dropped_total", "Webhooks given up after the last attempt.", m.webhooksDropped.Load())

	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(w, "# HELP khala_threads_ended_total Threads ended, by status.\n# TYPE khala_threads_ended_total counter\n")
	for _, s := range slices.Sorted(maps.Keys(m.threadsEnded)) {
		fmt.Fprintf(w, "khala_threads_ended_total{status=%q} %d\n", s, m.threadsEnded[s])
	}
	fmt.Fprintf(w, "# HELP khala_http_requests_total HTTP requests, by status code.\n# TYPE khala_http_requests_total counter\n")
	for _, c := range slices.Sorted(maps.Keys(m.requests)) {
		fmt.Fprintf(w, "khala_http_requests_total{code=\"%d\"} %d\n", c, m.requests[c])
	}
	m.claimWait.write(w, "khala_claim_wait_seconds", "Time a turn waited in the queue before it was claimed.")
	m.turnDuration.write(w, "khala_turn_duration_seconds", "Time from a turn's claim to its accepted response.")
	m.claimRequests.write(w, "khala_claim_request_seconds", "Time a claim request took, long poll included.")
}

// histogram is a Prometheus histogram with fixed buckets.
type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(d time.Duration) {
	v := d.Seconds()
	i := sort.SearchFloat64s(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

func (h *histogram) write(w io.Writer, name, help string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, fmtFloat(b), cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, h.n, name, fmtFloat(h.sum), name, h.n)
}

func fmtFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%g", f)
}

// writeSharedStatements prints what this replica (on PostgreSQL) wrote of its
// claims and of its changes made from claims' views (most answers), and
// in how many statements: concurrent ones share one (khalapg/batch.go).
func writeSharedStatements(w io.Writer, st khaladb.WriteStats) {
	fmt.Fprintf(w, "# HELP khala_pg_writes_total Claims, and answers written from their claim's view, by kind.\n"+
		"# TYPE khala_pg_writes_total counter\n"+
		"khala_pg_writes_total{kind=\"claim\"} %d\nkhala_pg_writes_total{kind=\"answer\"} %d\n", st.Claims, st.Changes)
	fmt.Fprintf(w, "# HELP khala_pg_statements_total Statements that wrote them (concurrent ones share one), by kind.\n"+
		"# TYPE khala_pg_statements_total counter\n"+
		"khala_pg_statements_total{kind=\"claim\"} %d\nkhala_pg_statements_total{kind=\"answer\"} %d\n", st.ClaimStatements, st.ChangeStatements)
}
