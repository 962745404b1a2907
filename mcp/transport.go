package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one message on stdin, as the SDK's own transport does.
const maxLine = sdk.DefaultMaxLineLength

// StdioTransport serves MCP on in and out (newline-delimited JSON-RPC).
// It differs from the SDK's own transport in two ways:
//   - The SDK ends a session at the first line that is not a JSON-RPC
//     message; this transport answers such a line with a JSON-RPC error
//     (parse error, or invalid request) and goes on, so one bad line from
//     a client is not the end of the server.
//   - At the end of its input the SDK cancels the calls in flight and
//     drops their replies, even of calls it has read and not yet started:
//     a client that writes its requests and closes its end (a script, a
//     test, some hosts) got no reply at all. This transport tells the SDK
//     of the end only once every call passed on has been answered.
func StdioTransport(in io.Reader, out io.Writer) sdk.Transport {
	s := &stdio{out: out, answered: make(chan struct{}), closed: make(chan struct{})}
	pr, pw := io.Pipe()
	go s.forward(in, pw)
	return &sdk.IOTransport{Reader: pr, Writer: s}
}

// stdio is a session's stdout, shared by the SDK and the transport, and
// the count of the calls on stdin still to answer.
type stdio struct {
	mu         sync.Mutex // one whole line at a time on out; guards the rest
	out        io.Writer
	unanswered int  // calls passed to the SDK and not yet answered
	ended      bool // stdin is at its end

	answerOnce sync.Once
	answered   chan struct{} // closed when stdin has ended and every call is answered
	closeOnce  sync.Once
	closed     chan struct{} // closed when the SDK closes the session
}

// forward passes stdin's JSON-RPC lines to the SDK on pw and answers the
// others itself. At the end of stdin it waits for the replies to the
// calls passed on (or for the session to close) before ending pw.
func (s *stdio) forward(in io.Reader, pw *io.PipeWriter) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if reply := checkMessage(line); reply != nil {
			s.writeLine(reply, 0)
			continue
		}
		s.passOn(calls(line))
		if _, err := pw.Write(append(line, '\n')); err != nil {
			return // the session is over
		}
	}
	s.end()
	select {
	case <-s.answered:
	case <-s.closed:
	}
	pw.CloseWithError(sc.Err())
}

// Write writes one line of the SDK's: a message, or a batch's replies.
func (s *stdio) Write(p []byte) (int, error) { return s.writeLine(p, replies(p)) }

// Close is the SDK closing the session (stdout stays open).
func (s *stdio) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// writeLine writes p, which answers n calls.
func (s *stdio) writeLine(p []byte, n int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	written, err := s.out.Write(p)
	s.unanswered -= n
	s.checkAnswered()
	return written, err
}

func (s *stdio) passOn(calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unanswered += calls
}

func (s *stdio) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.checkAnswered()
}

func (s *stdio) checkAnswered() {
	if s.ended && s.unanswered <= 0 {
		s.answerOnce.Do(func() { close(s.answered) })
	}
}

// calls counts the calls in a line passed to the SDK (the requests with
// an id, which it answers), decoding the line as the SDK does.
func calls(line []byte) int {
	msgs := []json.RawMessage{line}
	if trimmed := bytes.TrimSpace(line); trimmed[0] == '[' {
		msgs = nil
		json.Unmarshal(trimmed, &msgs)
	}
	n := 0
	for _, raw := range msgs {
		if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				n++
			}
		}
	}
	return n
}

// replies counts the replies in a line the SDK writes: the messages
// without a "method" (a batch's replies come as an array). The SDK writes
// "jsonrpc" and "id" first, then "method", "result" or "error", so a
// message is read only up to that key: a large result is not scanned.
func replies(line []byte) int {
	if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []struct {
			Method *json.RawMessage `json:"method"`
		}
		json.Unmarshal(trimmed, &batch)
		n := 0
		for _, m := range batch {
			if m.Method == nil {
				n++
			}
		}
		return n
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0
		}
		switch key {
		case "method":
			return 0
		case "result", "error":
			return 1
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return 0
		}
	}
	return 1
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
