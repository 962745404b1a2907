package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// runPiped runs a session written at once and ended, over a transport
// that gives up giveUpAfter after the end of its input, and returns what
// Run wrote and returned.
func runPiped(t *testing.T, vars map[string]string, giveUpAfter time.Duration, lines ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer // the transport writes one line at a time
	done := make(chan error, 1)
	go func() {
		in := strings.NewReader(strings.Join(lines, "\n") + "\n")
		done <- Run(context.Background(), Options{Getenv: getenv(vars)}, newStdioTransport(in, &out, giveUpAfter))
	}()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10s after the end of its input")
		return "", nil
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// The SDK drops, without a reply, a call whose id is one in flight: the
// transport waited for its reply for ever. It waits for each id once.
func TestEndOfInputAfterACallWithAnIDInFlight(t *testing.T) {
	for run := range 20 {
		out, err := runPiped(t, nil, endOfInputWait, initialize,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":1.0,"method":"tools/list"}`) // 1.0 is the SDK's id 1
		if err != nil || !strings.HasPrefix(out, `{"jsonrpc":"2.0","id":1,"result":{"capabilities"`) {
			t.Fatalf("run %d: Run: %v, replies:\n%s", run, err, out)
		}
	}
}

// A call still unanswered when the wait after the end of input runs out
// (here blocked reading a FIFO no one writes) ends the session anyway,
// and Run says which.
func TestEndOfInputGivesUpOnCallsInFlight(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "snapshot")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	defer func() { // let the blocked read go
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}()
	vars := map[string]string{"NERVE_THREAD": "w#thread-1", "NERVE_THREAD_SNAPSHOT": fifo, "NERVE_STEP": "2"}
	out, err := runPiped(t, vars, 200*time.Millisecond, initialize,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"read","method":"tools/call","params":{"name":"thread_messages","arguments":{}}}`)
	want := `gave up on the calls still unanswered 200ms after the end of stdin (id "read")`
	if err == nil || err.Error() != want || strings.Count(out, "\n") != 1 {
		t.Fatalf("Run: %v, want %q; replies:\n%s", err, want, out)
	}
}

// The transport reads the ids of the SDK's replies as the SDK decodes
// the ids of calls.
func TestReplyIDs(t *testing.T) {
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"result":{"big":[1,2,3]}}`:                            `[1]`,
		`{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"x"}}`:             `["a"]`,
		`{"jsonrpc":"2.0","id":3,"method":"roots/list"}`:                               `[]`,
		`{"jsonrpc":"2.0","method":"notifications/message"}`:                           `[]`,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":"b","error":{}}]`: `[1,"b"]`,
	} {
		ids := []any{}
		for _, id := range replies([]byte(line)) {
			ids = append(ids, id.Raw())
		}
		if got := toJSON(ids); got != want {
			t.Errorf("replies(%s) = %s, want %s", line, got, want)
		}
	}
	call := calls([]byte(`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`))
	if reply := replies([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)); len(call) != 1 || !slices.Equal(call, reply) {
		t.Errorf("call id %v, reply id %v: want one, the same", call, reply)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
