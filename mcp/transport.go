package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one message on stdin, as the SDK's own transport does.
const maxLine = sdk.DefaultMaxLineLength

// endOfInputWait bounds the wait, after the end of stdin, for the replies
// to the calls read: the longest a call may take (workflow_run's wait, at
// most maxRunWait) and a minute to read its outcome. A call the SDK never
// answers (one it drops, a batch it never completes) ends the session
// then, not never.
const endOfInputWait = maxRunWait + time.Minute

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
//     of the end only once every call passed on has been answered, or
//     endOfInputWait after it; then Run returns an error naming the calls
//     left unanswered.
func StdioTransport(in io.Reader, out io.Writer) sdk.Transport {
	return newStdioTransport(in, out, endOfInputWait)
}

// stdioTransport is the SDK's IOTransport over a stdio, which Run asks
// whether it gave up on calls.
type stdioTransport struct {
	*sdk.IOTransport
	s *stdio
}

func newStdioTransport(in io.Reader, out io.Writer, giveUpAfter time.Duration) *stdioTransport {
	s := &stdio{
		out: out, outstanding: map[jsonrpc.ID]bool{}, giveUpAfter: giveUpAfter,
		answered: make(chan struct{}), closed: make(chan struct{}), gaveUp: make(chan struct{}),
	}
	pr, pw := io.Pipe()
	go s.forward(in, pw)
	return &stdioTransport{IOTransport: &sdk.IOTransport{Reader: pr, Writer: s}, s: s}
}

// stdio is a session's stdout, shared by the SDK and the transport, and
// the calls on stdin still to answer.
type stdio struct {
	mu  sync.Mutex // one whole line at a time on out; guards the rest
	out io.Writer
	// outstanding are the ids of the calls passed to the SDK and not yet
	// answered. A set, not a count: the SDK drops a call whose id is in
	// flight without a word, so a second call with that id gets no reply.
	outstanding map[jsonrpc.ID]bool
	ended       bool // stdin is at its end
	giveUpAfter time.Duration
	abandoned   []jsonrpc.ID // outstanding when the wait ran out

	answerOnce sync.Once
	answered   chan struct{} // closed when stdin has ended and every call is answered
	closeOnce  sync.Once
	closed     chan struct{} // closed when the SDK closes the session
	gaveUp     chan struct{} // closed when giveUpAfter has passed since the end of stdin
}

// forward passes stdin's JSON-RPC lines to the SDK on pw and answers the
// others itself. At the end of stdin it waits for the replies to the
// calls passed on (or for the session to close, or giveUpAfter) before
// ending pw.
func (s *stdio) forward(in io.Reader, pw *io.PipeWriter) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if reply := checkMessage(line); reply != nil {
			s.writeLine(reply, nil)
			continue
		}
		s.passOn(calls(line))
		if _, err := pw.Write(append(line, '\n')); err != nil {
			return // the session is over
		}
	}
	s.end()
	timer := time.NewTimer(s.giveUpAfter)
	defer timer.Stop()
	select {
	case <-s.answered:
	case <-s.closed:
	case <-timer.C:
		s.giveUp()
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

// writeLine writes p, which answers the calls ids.
func (s *stdio) writeLine(p []byte, ids []jsonrpc.ID) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	written, err := s.out.Write(p)
	for _, id := range ids {
		delete(s.outstanding, id)
	}
	s.checkAnswered()
	return written, err
}

func (s *stdio) passOn(ids []jsonrpc.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.outstanding[id] = true
	}
}

func (s *stdio) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.checkAnswered()
}

func (s *stdio) checkAnswered() {
	if s.ended && len(s.outstanding) == 0 {
		s.answerOnce.Do(func() { close(s.answered) })
	}
}

func (s *stdio) giveUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.outstanding {
		s.abandoned = append(s.abandoned, id)
	}
	close(s.gaveUp)
}

// abandonedError names the calls the transport gave up on, or is nil.
func (s *stdio) abandonedError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.abandoned) == 0 {
		return nil
	}
	ids := make([]string, len(s.abandoned))
	for i, id := range s.abandoned {
		b, _ := json.Marshal(id.Raw())
		ids[i] = string(b)
	}
	slices.Sort(ids)
	return fmt.Errorf("gave up on the calls still unanswered %s after the end of stdin (id %s)", s.giveUpAfter, strings.Join(ids, ", "))
}

// calls are the ids of the calls in a line passed to the SDK (the
// requests with an id, which it answers), decoded as the SDK decodes them:
// 1 and 1.0 are one id.
func calls(line []byte) []jsonrpc.ID {
	msgs := []json.RawMessage{line}
	if trimmed := bytes.TrimSpace(line); trimmed[0] == '[' {
		msgs = nil
		json.Unmarshal(trimmed, &msgs)
	}
	var ids []jsonrpc.ID
	for _, raw := range msgs {
		if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				ids = append(ids, req.ID)
			}
		}
	}
	return ids
}

// replies are the ids of the replies in a line the SDK writes: the
// messages without a "method" (a batch's replies come as an array). The
// SDK writes "jsonrpc" and "id" first, then "method", "result" or
// "error", so a message is read only up to that key: a large result is
// not scanned.
func replies(line []byte) []jsonrpc.ID {
	if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []struct {
			ID     any              `json:"id"`
			Method *json.RawMessage `json:"method"`
		}
		json.Unmarshal(trimmed, &batch)
		var ids []jsonrpc.ID
		for _, m := range batch {
			if id, err := jsonrpc.MakeID(m.ID); err == nil && m.Method == nil && id.IsValid() {
				ids = append(ids, id)
			}
		}
		return ids
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var id jsonrpc.ID
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		switch key {
		case "method":
			return nil
		case "result", "error":
			return replyID(id)
		case "id":
			var v any
			if dec.Decode(&v) != nil {
				return nil
			}
			id, _ = jsonrpc.MakeID(v)
			continue
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil
		}
	}
	return replyID(id)
}

// replyID is the ids a reply answers: its own, if it has one.
func replyID(id jsonrpc.ID) []jsonrpc.ID {
	if !id.IsValid() {
		return nil
	}
	return []jsonrpc.ID{id}
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
