package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func khalaTestFactory(home string) (*Factory, *IOStreams) {
	ios, _, _ := TestStreams()
	f := newFactory(ios)
	f.Getenv = func(k string) string {
		if k == "NERVE_HOME" {
			return home
		}
		return ""
	}
	return f, ios
}

func TestKhalaServeFlags(t *testing.T) {
	home := t.TempDir()
	f, _ := khalaTestFactory(home)
	var got *khalaServeOptions
	cmd := newCmdKhalaServe(f, func(o *khalaServeOptions) error { got = o; return nil })
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Addr != "127.0.0.1:7700" || got.DB != filepath.Join(home, "khala.db") || got.Grace != 30*time.Second || got.MaxBody != 4<<20 {
		t.Fatalf("defaults: %+v", got)
	}
	cmd = newCmdKhalaServe(f, func(o *khalaServeOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--addr", "0.0.0.0:9", "--db", "/x/k.db", "--max-wait", "5s", "--log-level", "debug"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Addr != "0.0.0.0:9" || got.DB != "/x/k.db" || got.MaxWait != 5*time.Second || got.LogLevel != "debug" {
		t.Fatalf("flags: %+v", got)
	}
}

func TestKhalaServeUsageErrors(t *testing.T) {
	ios, _, _ := TestStreams()
	tests := []struct {
		name string
		opts khalaServeOptions
	}{
		{"DSN with a bad port", khalaServeOptions{Postgres: "postgres://u:pw@host:notaport/db", LogLevel: "info", MaxBody: 4096, Addr: "127.0.0.1:0"}},
		{"DSN with a bad sslmode", khalaServeOptions{Postgres: "host=h port=5432 password=pw sslmode=bogus", LogLevel: "info", MaxBody: 4096, Addr: "127.0.0.1:0"}},
		{"negative pool", khalaServeOptions{Postgres: "postgres://h/db", PoolSize: -1, LogLevel: "info", MaxBody: 4096, Addr: ":1"}},
		{"pool too large", khalaServeOptions{Postgres: "postgres://h/db", PoolSize: 5000, LogLevel: "info", MaxBody: 4096, Addr: ":1"}},
		{"pool without postgres", khalaServeOptions{DB: "/x/k.db", PoolSize: 5, LogLevel: "info", MaxBody: 4096, Addr: ":1"}},
		{"unknown log level", khalaServeOptions{LogLevel: "chatty", MaxBody: 4096, Addr: ":1"}},
		{"body limit too small", khalaServeOptions{LogLevel: "info", MaxBody: 10, Addr: ":1"}},
		{"address without a port", khalaServeOptions{LogLevel: "info", MaxBody: 4096, Addr: "nonsense"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.IO = ios
			err := khalaServeRun(context.Background(), &o)
			if exitCodeOf(err) != exitUsage || hintOf(err) == "" {
				t.Errorf("want a usage error with a hint, got %v", err)
			}
			if err != nil && strings.Contains(err.Error(), "pw") {
				t.Errorf("the password is in the error: %v", err)
			}
		})
	}
}

func TestKhalaEnrollTokenFlags(t *testing.T) {
	home := t.TempDir()
	f, _ := khalaTestFactory(home)
	var got *khalaEnrollOptions
	run := func(args ...string) error {
		cmd := newCmdKhalaEnrollToken(f, func(o *khalaEnrollOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		return cmd.Execute()
	}
	if err := run(); err != nil || got.Uses != 1 || got.TTL != 24*time.Hour || got.DB != filepath.Join(home, "khala.db") {
		t.Fatalf("defaults: %v %+v", err, got)
	}
	if err := run("--uses", "5", "--ttl", "0", "--json"); err != nil || got.Uses != 5 || got.TTL != 0 || !got.JSON {
		t.Fatalf("flags: %v %+v", err, got)
	}
	if err := run("--uses", "0"); exitCodeOf(err) != exitUsage {
		t.Errorf("--uses 0: want exit 2, got %v", err)
	}
	// A negative duration is refused by the root, for every command.
	io, _, errOut := TestStreams()
	if code := Main([]string{"khala", "enroll-token", "--ttl", "-1s"}, io); code != exitUsage || !strings.Contains(errOut.String(), "--ttl -1s: a duration cannot be negative") {
		t.Errorf("--ttl -1s: exit %d, %s", code, errOut)
	}
}

func TestKhalaEnrollTokenRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sub", "khala.db")
	ios, out, errOut := TestStreams()
	if err := khalaEnrollRun(context.Background(), &khalaEnrollOptions{IO: ios, DB: db, Uses: 2, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(out.String())
	if !strings.HasPrefix(tok, "khala_enroll_") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("stdout must be the token alone: %q", out)
	}
	if !strings.Contains(errOut.String(), "for 2 agent(s)") || !strings.Contains(errOut.String(), "written to "+db) || strings.Contains(errOut.String(), tok) {
		t.Fatalf("stderr: %q", errOut)
	}
	ios, out, _ = TestStreams()
	if err := khalaEnrollRun(context.Background(), &khalaEnrollOptions{IO: ios, DB: db, Uses: 1, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Token     string    `json:"token"`
		Uses      int       `json:"uses"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil || resp.Uses != 1 || !resp.ExpiresAt.IsZero() || resp.Token == tok {
		t.Fatalf("json: %v %s", err, out)
	}
}

func TestKhalaCommandTree(t *testing.T) {
	f, _ := khalaTestFactory(t.TempDir())
	cmd := newCmdKhala(f)
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	if strings.Join(names, " ") != "agent enroll-token serve user" {
		t.Fatalf("subcommands: %v", names)
	}
}
