package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/config"
)

// A reload takes what `nerve validate` passes and refuses what it reports
// in nerve.yaml (here a reflex naming no workflow); a broken workflow file
// is the workflow's problem and does not hold the config back.
func TestReloadValidatesLikeNerveValidate(t *testing.T) {
	home, err := os.MkdirTemp("", "nd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	write := func(name, s string) {
		t.Helper()
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("nerve.yaml", "agent: {max_concurrent_turns: 2}\n")
	getenv := func(k string) string {
		if k == "NERVE_HOME" {
			return home
		}
		return ""
	}
	load := func() (*config.Config, error) { return config.Load(config.LoadOptions{Getenv: getenv}) }
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Load: load, Version: "test", Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	c := NewClient(config.Paths{Home: home}.Socket())
	status := func() *Status {
		t.Helper()
		st, err := c.Status(context.Background())
		if err != nil {
			return &Status{}
		}
		return st
	}
	waitUntil := func(what string, cond func(*Status) bool) *Status {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if st := status(); cond(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v", what, status().Config)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("the daemon", func(st *Status) bool { return st.Capacity == 2 })

	write("nerve.yaml", `agent: {max_concurrent_turns: 5}
senses:
  - {name: tick, kind: interval, every: 1h}
reflexes:
  - {on: tick, do: workflow, workflow: nosuch}
`)
	st := waitUntil("the refusal", func(st *Status) bool { return strings.Contains(st.Config.LastReload, `unknown workflow "nosuch"`) })
	if st.Capacity != 2 {
		t.Fatalf("a refused nerve.yaml changed the capacity to %d", st.Capacity)
	}

	write("workflows/broken.yaml", "workflow: broken\n")
	write("nerve.yaml", "agent: {max_concurrent_turns: 5}\n")
	waitUntil("the valid change", func(st *Status) bool { return st.Config.LastReload == "ok" && st.Capacity == 5 })
}
