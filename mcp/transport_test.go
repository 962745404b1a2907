package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
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

// At the end of stdin the server answers every call it has read, then
// returns. What the SDK does not answer (a notification, whatever its
// "id" says, or a line the transport answers itself) is not waited for.
func TestEndOfInputAnswersEveryCall(t *testing.T) {
	session := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled","params":{"requestId":9}}`,
		`{"jsonrpc":"2.0","ID":3,"method":"notifications/cancelled","params":{"requestId":9}}`,
		`garbage`,
		`{"jsonrpc":"2.0","id":"four","method":"tools/list"}`,
	}, "\n") + "\n"
	var out bytes.Buffer // the transport writes one line at a time
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Getenv: getenv(nil)}, StdioTransport(strings.NewReader(session), &out))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10s after the end of its input")
	}
	var ids []string
	for line := range strings.Lines(out.String()) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		json.Unmarshal([]byte(line), &m)
		if m.Result != nil {
			ids = append(ids, string(m.ID))
		}
	}
	if slices.Sort(ids); strings.Join(ids, " ") != `"four" 1 2` || !strings.Contains(out.String(), `"code":-32700`) {
		t.Fatalf("replies:\n%s", out.String())
	}
}
