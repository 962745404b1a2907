package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
)

// startDaemon runs a real daemon in this process on a temp NERVE_HOME.
func startDaemon(t *testing.T) (*Client, config.Paths, func() error) {
	t.Helper()
	return startDaemonWith(t, nil)
}

// startDaemonWith is startDaemon with nerve.yaml changed by edit first.
func startDaemonWith(t *testing.T, edit func(*config.Config)) (*Client, config.Paths, func() error) {
	t.Helper()
	home, err := os.MkdirTemp("", "nd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	cfg := config.Defaults(home)
	cfg.Workflows = []string{filepath.Join(home, "workflows")}
	// These daemons run no nerve binary, which a sandboxed turn's network
	// bridge is (the sandbox is tested through the binary, in cmd/nerve).
	cfg.Daemon.Sandbox = "none"
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logger, _ := newTestLog(t)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Version: "test", Logger: logger})
	}()
	paths := config.Paths{Home: home}
	c := NewClient(paths.Socket())
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("daemon did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var (
		once    sync.Once
		stopErr error
	)
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(20 * time.Second):
				stopErr = errors.New("daemon did not stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { stop() })
	return c, paths, stop
}

func TestControlAPI(t *testing.T) {
	c, paths, stop := startDaemon(t)
	ctx := context.Background()

	fi, err := os.Stat(paths.Socket())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v", fi.Mode(), err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Version != "test" || st.PID != os.Getpid() {
		t.Fatalf("status %+v %v", st, err)
	}

	_, err = c.Thread(ctx, "thread-404")
	if !IsNotFound(err) {
		t.Fatalf("unknown thread: %v", err)
	}
	_, err = c.Start(ctx, StartRequest{Workflow: "nope"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != codeNotFound || ae.ExitCode() != 2 || !strings.Contains(ae.Hint(), "no workflows") {
		t.Fatalf("unknown workflow: %#v", err)
	}

	// Raw requests: a malformed body, a wrong Host.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", paths.Socket())
	}}}
	resp, err := hc.Post("http://"+apiHost+"/v1/threads", "application/json", strings.NewReader("{not json"))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed body: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	resp, err = hc.Get("http://evil.example/v1/status")
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("wrong host: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()

	// A thread runs through the API to completion, with its events streamed.
	os.MkdirAll(filepath.Join(paths.Home, "workflows"), 0o700)
	os.WriteFile(filepath.Join(paths.Home, "workflows", "w.yaml"), []byte(
		"workflow: w\nmoderator: 'last = null ? {\"role\": \"r\"} : {\"done\": true}'\nroles:\n  r: {adapter: sh, prompt: hi}\n"), 0o600)
	// No adapter "sh" is configured: refused before a thread starts.
	if _, err := c.Start(ctx, StartRequest{Workflow: "w"}); err == nil || !strings.Contains(err.Error(), `unknown adapter "sh"`) {
		t.Fatalf("unknown adapter: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if _, err := os.Stat(paths.Socket()); !os.IsNotExist(err) {
		t.Fatal("socket left behind after shutdown")
	}
	if _, err := c.Status(ctx); err == nil {
		t.Fatal("status after stop")
	} else {
		var nr *NotRunningError
		if !errors.As(err, &nr) {
			t.Fatalf("want NotRunningError, got %v", err)
		}
	}
}

func TestSecondInstanceRefused(t *testing.T) {
	_, paths, _ := startDaemon(t)
	cfg := config.Defaults(paths.Home)
	logger, _ := newTestLog(t)
	err := Run(context.Background(), Options{Config: cfg, Logger: logger})
	var running *ErrRunning
	if !errors.As(err, &running) {
		t.Fatalf("second daemon: %v", err)
	}
}

func TestSocketPathTooLong(t *testing.T) {
	_, err := listen("/tmp/" + strings.Repeat("x", 120) + "/nerve.sock")
	if err == nil || !strings.Contains(err.Error(), "shorter NERVE_HOME") {
		t.Fatalf("long path: %v", err)
	}
}
