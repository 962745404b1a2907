package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EKnowledgeQueryThroughDaemon: with a daemon running, `nerve
// knowledge query` is answered by it (its metric counts each query) and
// prints what the CLI prints alone; a sync after a change is seen by the
// daemon's open index; with the daemon stopped the CLI answers itself.
func TestE2EKnowledgeQueryThroughDaemon(t *testing.T) {
	e := newEnv(t)
	metricsAddr := freeAddr(t)
	e.write("nerve.yaml", fmt.Sprintf("daemon:\n  metrics_addr: %s\n", metricsAddr))
	repo := filepath.Join(e.home, "repo")
	e.write("repo/.git/HEAD", "ref: refs/heads/main\n")
	e.write("repo/lease.go", "package lease\n\n// Renew extends the lease of a claimed turn before it expires.\nfunc Renew() {}\n")
	e.write("repo/queue.go", "package queue\n\n// Claim takes the oldest queued turn of the highest priority.\nfunc Claim() {}\n")
	e.must(0, "knowledge", "sync", "--repo", repo)

	alone := e.must(0, "knowledge", "query", "--repo", repo, "--json", "how is a lease renewed")
	if !strings.Contains(alone.stdout, `"path":"lease.go"`) {
		t.Fatalf("no daemon: %s", alone)
	}
	e.must(0, "daemon", "start")
	queries := func() string {
		t.Helper()
		b := scrapeMetrics(t, metricsAddr)
		for _, line := range strings.Split(b, "\n") {
			if v, ok := strings.CutPrefix(line, "nerve_knowledge_queries_total "); ok {
				return v
			}
		}
		t.Fatalf("no nerve_knowledge_queries_total in /metrics:\n%s", b)
		return ""
	}
	if q := queries(); q != "0" {
		t.Fatalf("%s knowledge queries before any", q)
	}
	for i := range 2 {
		got := e.must(0, "knowledge", "query", "--repo", repo, "--json", "how is a lease renewed")
		if got.stdout != alone.stdout || got.stderr != alone.stderr {
			t.Fatalf("query %d through the daemon printed\n%s\nalone it printed\n%s", i+1, got, alone)
		}
	}
	if q := queries(); q != "2" {
		t.Fatalf("the daemon answered %s queries, want 2", q)
	}

	e.write("repo/backoff.go", "package backoff\n\n// Jitter spreads retries of rate-limited adapters.\nfunc Jitter() {}\n")
	e.must(0, "knowledge", "sync", "--repo", repo)
	got := e.must(0, "knowledge", "query", "--repo", repo, "jitter of retries")
	if !strings.HasPrefix(got.stdout, "backoff.go:") || queries() != "3" {
		t.Fatalf("after a sync, through the daemon: %s", got)
	}

	// What the daemon cannot answer (no index here), the CLI answers
	// itself, with its own message and exit code.
	other := filepath.Join(e.home, "other")
	os.MkdirAll(filepath.Join(other, ".git"), 0o700)
	bad := e.must(1, "knowledge", "query", "--repo", other, "anything")
	if !strings.Contains(bad.stderr, "no knowledge index") || strings.Count(strings.TrimSpace(bad.stderr), "\n") > 1 {
		t.Fatalf("no index, daemon running: %s", bad)
	}

	e.stopDaemon()
	after := e.must(0, "knowledge", "query", "--repo", repo, "--json", "how is a lease renewed")
	if !strings.Contains(after.stdout, `"path":"lease.go"`) {
		t.Fatalf("daemon stopped: %s", after)
	}
}
