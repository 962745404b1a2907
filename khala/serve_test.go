package khala

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// serveInBackground runs Serve on a free loopback port and returns its URL
// and a stop func that waits for Serve to return.
func serveInBackground(t *testing.T, db string) (string, func() error) {
	t.Helper()
	return serveOptsInBackground(t, ServeOptions{DB: db})
}

// serveOptsInBackground is serveInBackground with options (Addr, Version,
// Logger and Ready are set here).
func serveOptsInBackground(t *testing.T, o ServeOptions) (string, func() error) {
	t.Helper()
	lw := &logWriter{t: t}
	t.Cleanup(func() { lw.mu.Lock(); lw.done = true; lw.mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		o.Addr, o.Version, o.Logger = "127.0.0.1:0", "test", slog.New(slog.NewTextHandler(lw, nil))
		o.Ready = func(u string) { ready <- u }
		errc <- Serve(ctx, o)
	}()
	select {
	case u := <-ready:
		stopped := false
		stop := func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			return <-errc
		}
		t.Cleanup(func() { stop() })
		return u, stop
	case err := <-errc:
		cancel()
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not become ready")
	}
	return "", nil
}

func TestServeAndEnrollTokens(t *testing.T) {
	db := filepath.Join(t.TempDir(), "home", "khala.db")
	// No server yet: the token is written to the file directly.
	first, via, err := IssueToken(t.Context(), db, 1, time.Hour)
	if err != nil || via != ViaDatabase || !strings.HasPrefix(first.Token, prefixEnroll) {
		t.Fatalf("issue without a server: %v %s %+v", err, via, first)
	}
	url, stop := serveInBackground(t, db)
	fi, err := os.Stat(AdminFile(db))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin file: %v %v", err, fi)
	}
	// The server holds the file: the token comes through its admin path.
	second, via, err := IssueToken(t.Context(), db, 2, 0)
	if err != nil || via != ViaServer || second.Uses != 2 || !second.ExpiresAt.IsZero() {
		t.Fatalf("issue through the server: %v %s %+v", err, via, second)
	}
	ts := &testServer{t: t, URL: url, client: http.DefaultClient}
	for i, tok := range []string{first.Token, second.Token} {
		c := &client{ts: ts, token: tok}
		c.must("POST", "/v1/agents", map[string]string{"name": "agent-" + string(rune('a'+i))}, 201, nil)
	}
	// A second server on the same file is refused.
	err = Serve(t.Context(), ServeOptions{Addr: "127.0.0.1:0", DB: db, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, khaladb.ErrLocked) {
		t.Fatalf("second serve: %v", err)
	}
	if _, err := os.Stat(AdminFile(db)); err != nil {
		t.Fatal("the refused server removed the running one's admin file")
	}
	// Nor can one listen on a taken port.
	host := strings.TrimPrefix(url, "http://")
	err = Serve(t.Context(), ServeOptions{Addr: host, DB: filepath.Join(t.TempDir(), "x.db"), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("taken port: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if _, err := os.Stat(AdminFile(db)); !os.IsNotExist(err) {
		t.Fatalf("admin file left after shutdown: %v", err)
	}
}

// Shutdown ends long polls at once with an empty answer, and the state
// committed before it is there after a restart.
func TestGracefulShutdown(t *testing.T) { eachBackend(t, testGracefulShutdown) }

func testGracefulShutdown(t *testing.T, bk backend) {
	o, enroll := bk.serveOptions(t)
	url, stop := serveOptsInBackground(t, o)
	ts := &testServer{t: t, URL: url, client: http.DefaultClient, enroll: enroll}
	a := ts.agent("a")
	a.putWorkflow(pairWF)
	id := a.start("pair", nil, "")
	a.claimOne()
	type res struct {
		status int
		body   string
		at     time.Time
	}
	polled := make(chan res)
	go func() {
		s, d := a.do("POST", "/v1/turns/claim", map[string]any{"wait": "50s"})
		polled <- res{s, string(d), time.Now()}
	}()
	waitFor(t, "the long poll to wait", func() bool {
		_, d := a.do("GET", "/metrics", nil)
		return strings.Contains(string(d), "\nkhala_claims_waiting 1\n")
	})
	stopped := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	r := <-polled
	if r.status != 200 || strings.TrimSpace(r.body) != "[]" || r.at.Sub(stopped) > 2*time.Second {
		t.Fatalf("long poll at shutdown: %d %s after %s", r.status, r.body, r.at.Sub(stopped))
	}
	url, _ = serveOptsInBackground(t, o)
	ts.URL = url
	if th := a.thread(id); th.Status != "running" || len(th.Turns) != 1 || th.Turns[0].Agent != "a" {
		t.Fatalf("after restart: %+v %+v", th.Thread, th.Turns)
	}
}
