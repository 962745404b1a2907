package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// A line that is not a JSON-RPC message gets an error reply, and the
// session goes on (the SDK alone would end it).
func TestBadLinesDoNotEndTheSession(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Getenv: getenv(nil)}, StdioTransport(inR, outW)) }()
	defer func() { cancel(); inW.Close(); outR.Close(); <-done }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	next := func() map[string]any {
		t.Helper()
		got := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if lines.Scan() {
				json.Unmarshal(lines.Bytes(), &m)
			}
			got <- m
		}()
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no reply within 10s")
			return nil
		}
	}
	send := func(s string) { io.WriteString(inW, s+"\n") }

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := next(); m["id"] != 1.0 || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for line, code := range map[string]float64{`garbage`: -32700, `{}`: -32600, `[1]`: -32600, `"str"`: -32600} {
		send(line)
		m := next()
		if e, _ := m["error"].(map[string]any); e == nil || e["code"] != code {
			t.Fatalf("%s: %v, want error %v", line, m, code)
		}
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := next(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("tools/list after bad lines: %v", m)
	}
}
