package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/reflex"
)

// serveMetrics serves Prometheus /metrics on addr (daemon.metrics_addr,
// a loopback address: validation refuses others, since the endpoint has
// no token). It returns the address it listens on and a func that stops
// it.
func (d *Daemon) serveMetrics(addr string) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("daemon.metrics_addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		d.writeMetrics(w)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener failed", "addr", addr, "err", err)
		}
	}()
	d.log.Info("serving /metrics", "addr", ln.Addr().String())
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// writeMetrics writes the daemon's gauges and counters in the Prometheus
// text format, by hand: a few series need no client library.
func (d *Daemon) writeMetrics(out io.Writer) {
	w := bufio.NewWriter(out)
	defer w.Flush()
	used, max := d.capacity.Used()
	gauge(w, "nerve_capacity", "Turns this agent runs at once (agent.max_concurrent_turns).", float64(max))
	gauge(w, "nerve_claimed_slots", "Capacity slots held by claimed remote turns.", float64(used))
	gauge(w, "nerve_active_turns", "Adapters running now.", float64(d.runner.activeCount()))
	fmt.Fprintf(w, "# HELP nerve_knowledge_queries_total Knowledge queries the daemon answered for `nerve knowledge query`.\n"+
		"# TYPE nerve_knowledge_queries_total counter\nnerve_knowledge_queries_total %d\n", d.knowledgeQueries.Load())

	as := d.gate.States()
	series := []struct {
		name, help string
		value      func(reflex.AdapterState) (float64, bool)
	}{
		{"nerve_adapter_spent_usd", "Dollars the adapter's answers cost today (UTC), as its CLI reported them.",
			func(a reflex.AdapterState) (float64, bool) { return a.Spent.USD, true }},
		{"nerve_adapter_spent_tokens", "Tokens (input, output, cache reads) of the adapter's answers today (UTC).",
			func(a reflex.AdapterState) (float64, bool) { return float64(a.Spent.Tokens), true }},
		{"nerve_adapter_daily_usd_cap", "The adapter's daily cap in dollars (adapters.NAME.daily_usd).",
			func(a reflex.AdapterState) (float64, bool) { return deref(a.DailyUSD) }},
		{"nerve_adapter_daily_tokens_cap", "The adapter's daily cap in tokens (adapters.NAME.daily_tokens).",
			func(a reflex.AdapterState) (float64, bool) { return deref(a.DailyTokens) }},
		{"nerve_adapter_capped", "1 when the adapter reached a daily cap: no turn starts with it until 00:00 UTC.",
			func(a reflex.AdapterState) (float64, bool) { return bool01(a.Hold != nil && a.Hold.Budget), true }},
		{"nerve_adapter_paused", "1 when the adapter is paused after rate limits: no claims, local turns wait.",
			func(a reflex.AdapterState) (float64, bool) { return bool01(!a.PausedUntil.IsZero()), true }},
		{"nerve_adapter_pause_seconds", "Length of the adapter's current back-off pause (0: none).",
			func(a reflex.AdapterState) (float64, bool) { return a.Pause.Seconds(), true }},
		{"nerve_adapter_rate_limited_in_a_row", "The adapter's rate-limited answers in a row.",
			func(a reflex.AdapterState) (float64, bool) { return float64(a.RateLimited), true }},
		{"nerve_adapter_waiting_turns", "Local turns waiting for the adapter's pause to end.",
			func(a reflex.AdapterState) (float64, bool) { return float64(a.Waiting), true }},
	}
	for _, s := range series {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", s.name, s.help, s.name)
		for _, a := range as {
			if v, ok := s.value(a); ok {
				fmt.Fprintf(w, "%s{adapter=%s} %g\n", s.name, label(a.Name), v)
			}
		}
	}
	fmt.Fprintf(w, "# HELP nerve_sandbox_proxy_refused_total Connections the turns' sandbox proxies refused, by host (past 50 hosts: other).\n# TYPE nerve_sandbox_proxy_refused_total counter\n")
	refused := d.netSeen.counts()
	for _, h := range slices.Sorted(maps.Keys(refused)) {
		fmt.Fprintf(w, "nerve_sandbox_proxy_refused_total{host=%s} %d\n", label(h), refused[h])
	}
	fmt.Fprintf(w, "# HELP nerve_turns_total Turns ended since the daemon started, by adapter and outcome.\n# TYPE nerve_turns_total counter\n")
	for _, a := range as {
		for _, o := range slices.Sorted(maps.Keys(a.Turns)) {
			fmt.Fprintf(w, "nerve_turns_total{adapter=%s,outcome=%s} %d\n", label(a.Name), label(o), a.Turns[o])
		}
	}
}

func gauge(w io.Writer, name, help string, v float64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
}

// label quotes a label value as the text format escapes it.
func label(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

func deref[T int64 | float64](p *T) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return float64(*p), true
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
