package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Server is a model endpoint on loopback that speaks the four APIs the
// agent CLIs call: Anthropic Messages (claude), OpenAI Responses (codex),
// OpenAI Chat Completions (qwen, opencode) and Gemini (gemini). In mode
// "agent" it plays an agent that reads its thread through nerve's MCP
// server: it asks for the tool thread_messages (after a tool search where
// the CLI hides MCP tools behind one), then answers "Quoted: " and the
// content of the last message the tool returned. Mode "plain" answers
// Plain; "json" answers JSONAnswer, a fenced json block; "shell" runs
// ShellCommand through the CLI's shell tool and answers "Tool said: " and
// its output. Mode "500" fails every call, "429" refuses every call for
// rate (Retry-After: 1); mode "hang" never answers.
type Server struct {
	// URL is the endpoint's base, http://127.0.0.1:PORT.
	URL  string
	srv  *httptest.Server
	mode string
	errf func(format string, args ...any)
	stop chan struct{}

	mu       sync.Mutex
	requests []string // path and body, in order
}

// Start starts a Server in mode; tb.Cleanup closes it and a request it
// cannot read fails tb.
func Start(tb testing.TB, mode string) *Server {
	tb.Helper()
	m := &Server{mode: mode, errf: tb.Errorf, stop: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	m.URL = m.srv.URL
	tb.Cleanup(func() {
		close(m.stop)
		m.srv.CloseClientConnections()
		m.srv.Close()
	})
	return m
}

// Bodies returns each request so far as its path, a space and its body.
func (m *Server) Bodies() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

func (m *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.requests = append(m.requests, r.URL.Path+" "+string(body))
	m.mu.Unlock()
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	switch m.mode {
	case "hang":
		select {
		case <-r.Context().Done():
		case <-m.stop:
		}
		return
	case "500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"fake internal error","code":500,"status":"INTERNAL"}}`)
		return
	case "429":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"fake rate limit","code":429,"status":"RESOURCE_EXHAUSTED"}}`)
		return
	}
	var err error
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/messages"):
		err = anthropicTurn(w, body, m.mode)
	case strings.HasSuffix(p, "/responses"):
		err = responsesTurn(w, body, m.mode)
	case strings.HasSuffix(p, "/chat/completions"):
		err = chatTurn(w, body, m.mode)
	case strings.Contains(p, ":streamGenerateContent"), strings.Contains(p, ":generateContent"):
		err = geminiTurn(w, body, strings.Contains(p, ":stream"), m.mode)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		m.errf("fake model: %s: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// step is the fake agent's next move: a tool call (name, args) or text.
type step struct {
	tool string
	args map[string]any
	text string
}

// The fixed answers of modes plain, json and shell.
const (
	Plain        = "Hello from the fake model."
	JSONAnswer   = "Here is the verdict:\n\n```json\n{\"verdict\": \"approve\"}\n```"
	ShellCommand = "echo hello-from-tool"
)

// decide plays the agent of mode: results maps the tools called so far
// to what they returned; offered are the tools of this request.
func decide(mode string, results map[string]string, offered []string) step {
	switch mode {
	case "plain":
		return step{text: Plain}
	case "json":
		return step{text: JSONAnswer}
	case "shell":
		return shellStep(results, offered)
	}
	for name, res := range results {
		if isNerveTool(name) {
			return step{text: quote(res)}
		}
	}
	for _, name := range offered {
		if isNerveTool(name) {
			return step{tool: name, args: map[string]any{"last": 1}}
		}
	}
	// Claude and qwen defer MCP tools behind a search; qwen then calls
	// them through tool_call.
	for _, search := range []string{"ToolSearch", "tool_search"} {
		res, searched := results[search]
		if !searched && contains(offered, search) {
			return step{tool: search, args: map[string]any{"query": "select:mcp__nerve__thread_messages"}}
		}
		// Droid names it nerve___thread_messages and says so when the
		// name searched for is not found.
		if _, list, ok := strings.Cut(res, "Available exact tool names include: "); ok && contains(offered, search) {
			for _, name := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '.' }) {
				if isNerveTool(name) {
					return step{tool: search, args: map[string]any{"query": "select:" + name}}
				}
			}
		}
	}
	if _, searched := results["tool_search"]; searched && contains(offered, "tool_call") {
		return step{tool: "tool_call", args: map[string]any{"name": "mcp__nerve__thread_messages", "arguments": map[string]any{"last": 1}}}
	}
	// A CLI without MCP (pi) reads the thread with nerve's query command.
	if st, ok := threadByShell(results, offered); ok {
		return st
	}
	return step{text: "No nerve thread_messages tool was offered; tools: " + strings.Join(offered, " ")}
}

// isNerveTool reports whether a CLI's name of a tool is nerve's
// thread_messages: mcp__nerve__thread_messages (claude, qwen),
// mcp__nerve/thread_messages (codex's namespace), mcp_nerve_thread_messages
// (gemini), nerve_thread_messages (opencode, kilo), nerve-thread_messages
// (copilot), nerve___thread_messages (droid), bare (continue).
func isNerveTool(name string) bool {
	return name == "thread_messages" || strings.Contains(name, "nerve") && strings.HasSuffix(name, "thread_messages")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// quote finds thread_messages' JSON in a tool result (CLIs wrap it in
// their own text, pretty-print it, or pass on MCP's content array as JSON
// text) and quotes the content of the last message.
func quote(res string) string {
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(res)), &parts) == nil && len(parts) > 0 {
		res = parts[0].Text
	}
	for i := strings.IndexByte(res, '{'); i >= 0; {
		var out struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(strings.NewReader(res[i:])).Decode(&out); err == nil && len(out.Messages) > 0 {
			return "Quoted: " + out.Messages[len(out.Messages)-1].Content
		}
		j := strings.IndexByte(res[i+1:], '{')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "Could not find the tool's JSON in: " + res
}

// resultText is a tool result as text: a string, or the text of its
// parts.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func sse(w http.ResponseWriter, events ...any) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		if m, ok := ev.(map[string]any); ok && m["type"] != nil {
			fmt.Fprintf(w, "event: %s\n", m["type"])
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
