package remote

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestErrorsSayWhatToDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error": {"code": "unauthorized", "message": "unknown token"}}`))
	}))
	defer srv.Close()
	c := New("origin", srv.URL, "nrv_bad")
	_, err := c.Me(context.Background())
	var e *Error
	if !asError(err, &e) || e.Status != 401 || e.Code != "unauthorized" || !strings.Contains(e.Hint(), "nerve init --remote origin=") {
		t.Fatalf("401: %v (hint %q)", err, e.Hint())
	}
	if strings.Contains(err.Error(), "nrv_bad") {
		t.Fatal("an error must never show the token")
	}

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c = New("origin", "http://"+addr, "")
	c.Retries = 0
	_, err = c.Health(context.Background())
	if !asError(err, &e) || e.Status != 0 || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(e.Hint(), "http://"+addr) {
		t.Fatalf("refused: %v (hint %q)", err, e.Hint())
	}
}

// Transient answers are retried with backoff; others are not.
func TestRetriesTransientOnly(t *testing.T) {
	var calls atomic.Int32
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(status)
			return
		}
		w.Write([]byte(`{"ok": true, "version": "v1"}`))
	}))
	defer srv.Close()
	var slept []time.Duration
	c := New("origin", srv.URL, "")
	c.Retries = 5
	c.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	v, err := c.Health(context.Background())
	if err != nil || v != "v1" || calls.Load() != 3 || len(slept) != 2 || slept[1] < slept[0]/2 {
		t.Fatalf("version %q, err %v, calls %d, slept %v", v, err, calls.Load(), slept)
	}
	calls.Store(0)
	status = http.StatusBadRequest
	if _, err := c.Health(context.Background()); err == nil || calls.Load() != 1 {
		t.Fatalf("a 400 must not be retried: %v after %d calls", err, calls.Load())
	}
}

func TestTokenFiles(t *testing.T) {
	home := t.TempDir()
	if tok, err := LoadToken(home, "origin"); tok != "" || err != nil {
		t.Fatalf("no token yet: %q %v", tok, err)
	}
	if err := SaveToken(home, "origin", "nrv_x"); err != nil {
		t.Fatal(err)
	}
	if tok, err := LoadToken(home, "origin"); tok != "nrv_x" || err != nil {
		t.Fatalf("token %q %v", tok, err)
	}
	chmod(t, home+"/tokens/origin", 0o644)
	if _, err := LoadToken(home, "origin"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable token must be refused: %v", err)
	}
}

// What answers a non-JSON 404 where a Khala should be is asked for its
// /v1/health: not a Khala there, the error says so and keeps the status;
// a Khala that lacks the endpoint keeps its plain answer.
func TestNotAKhala(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := New("weird", srv.URL, "t").Me(context.Background())
	var e *Error
	if !asError(err, &e) || !e.NotKhala || e.Status != 404 || e.Error() != "remote weird: no Khala at "+srv.URL+" (GET /v1/health: 404 Not Found)" ||
		!strings.Contains(e.Hint(), srv.URL+"/v1/health") {
		t.Fatalf("not a Khala: %v (hint %q)", err, e.Hint())
	}

	khala := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/health" {
			w.Write([]byte(`{"ok": true, "version": "v1"}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer khala.Close()
	_, err = New("old", khala.URL, "t").Me(context.Background())
	if !asError(err, &e) || e.NotKhala || e.Status != 404 || e.Message != "404 Not Found" {
		t.Fatalf("a Khala without the endpoint: %v", err)
	}
}
