package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one message on stdin, as the SDK's own transport does.
const maxLine = sdk.DefaultMaxLineLength

// StdioTransport serves MCP on in and out (newline-delimited JSON-RPC).
// The SDK ends a session at the first line that is not a JSON-RPC message;
// this transport answers such a line with a JSON-RPC error instead (parse
// error, or invalid request) and goes on, so one bad line from a client
// is not the end of the server.
func StdioTransport(in io.Reader, out io.Writer) sdk.Transport {
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for sc.Scan() {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if reply := checkMessage(line); reply != nil {
				w.Write(reply)
				continue
			}
			if _, err := pw.Write(append(line, '\n')); err != nil {
				return // the session is over
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return &sdk.IOTransport{Reader: pr, Writer: w}
}

// checkMessage returns the error reply to a line that is not a JSON-RPC
// 2.0 message (or a batch of them), or nil for one that is.
func checkMessage(line []byte) []byte {
	type message struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
	}
	reply := func(id json.RawMessage, code int, msg string) []byte {
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
		return append(b, '\n')
	}
	if !json.Valid(line) {
		return reply(nil, -32700, "parse error: the line is not JSON")
	}
	var msgs []message
	if trimmed := bytes.TrimSpace(line); trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &msgs) != nil || len(msgs) == 0 {
			return reply(nil, -32600, "invalid request: a batch is an array of JSON-RPC 2.0 messages")
		}
	} else {
		var m message
		if json.Unmarshal(trimmed, &m) != nil {
			return reply(nil, -32600, "invalid request: not a JSON-RPC 2.0 message")
		}
		msgs = []message{m}
	}
	for _, m := range msgs {
		if m.JSONRPC != "2.0" {
			return reply(m.ID, -32600, `invalid request: "jsonrpc" must be "2.0"`)
		}
	}
	return nil
}

// lockedWriter serialises the server's messages and the transport's error
// replies, one whole line per Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }
