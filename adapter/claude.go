package adapter

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Claude Code (checked against 2.1.330, see testdata/FLAGS.md):
//
//	claude -p --output-format stream-json --verbose [--model M] [args…] [MCP] POSTURE -- PROMPT
//
// -p is a boolean (--print) and the prompt is the positional argument; it
// goes after "--" so a prompt starting with "-" is not read as a flag and
// the variadic --allowedTools cannot swallow it.

// claudeQueryTools are the commands an agent may run in the workspace and
// read-only postures: nerve's own context queries, nothing else.
var claudeQueryTools = []string{"Bash(nerve thread messages:*)", "Bash(nerve knowledge query:*)"}

// claudeReadTools are Claude Code's read-only tools, allowed explicitly in
// the read-only posture (dontAsk denies everything not listed).
var claudeReadTools = []string{"Read", "Grep", "Glob"}

// claudeEnv turns off everything but the model traffic: telemetry, error
// reporting, feature flags, update checks.
var claudeEnv = []string{
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	"DISABLE_AUTOUPDATER=1",
	"DISABLE_TELEMETRY=1",
	"DISABLE_ERROR_REPORTING=1",
}

// claudeMCP registers nerve's MCP server for the turn: --mcp-config takes
// the JSON itself, and --strict-mcp-config leaves out the user's own
// servers, whose tools no posture but full would allow anyway. The server
// inherits Claude's environment; its env repeats the turn's variables.
func claudeMCP(s *MCPServer, perm string) []string {
	if s == nil {
		return nil
	}
	srv := mcpStdioJSON(s, perm, map[string]any{"type": "stdio"})
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{MCPName: srv}})
	return []string{"--mcp-config", string(b), "--strict-mcp-config"}
}

// claudeMCPTools are nerve's MCP tools as --allowedTools names them.
func claudeMCPTools(s *MCPServer, perm string) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, t := range mcpTools(perm) {
		out = append(out, "mcp__"+MCPName+"__"+t)
	}
	return out
}

func claudePosture(perm string, mcp *MCPServer) (args, env []string) {
	switch perm {
	case PermFull:
		args = []string{"--permission-mode", "bypassPermissions"}
		// Claude refuses bypassPermissions as root unless told the machine
		// is a sandbox, which is exactly what "full" asserts.
		if os.Geteuid() == 0 {
			env = []string{"IS_SANDBOX=1"}
		}
	case PermReadOnly:
		args = append([]string{"--permission-mode", "dontAsk", "--permission-prompts", "none", "--allowedTools"},
			append(append(append([]string(nil), claudeReadTools...), claudeQueryTools...), claudeMCPTools(mcp, perm)...)...)
	default:
		args = append([]string{"--permission-mode", "acceptEdits", "--permission-prompts", "none", "--allowedTools"},
			append(append([]string(nil), claudeQueryTools...), claudeMCPTools(mcp, perm)...)...)
	}
	return args, env
}

func buildClaude(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if a.cfg.Model != "" {
		args = append(args, "--model", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, claudeMCP(req.MCP, a.info.Permissions)...)
	posture, env := claudePosture(a.info.Permissions, req.MCP)
	args = append(args, posture...)
	inv := &invocation{env: append(append([]string(nil), claudeEnv...), env...), parser: &claudeParser{}}
	if len(req.Prompt) > maxArgBytes {
		// -p with no prompt argument reads the prompt from stdin.
		inv.stdin = &req.Prompt
	} else {
		args = append(args, "--", req.Prompt)
	}
	inv.args = args
	return inv, nil
}

// claudeEvent is the union of the stream-json events nerve reads. Cursor's
// stream-json mirrors it, so cursor.go reuses it.
type claudeEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	Message   struct {
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// result
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result"`
	TotalCostUSD   *float64 `json:"total_cost_usd"`
	APIErrorStatus *int     `json:"api_error_status"`
	// Error is a string on Claude's assistant lines ("server_error") and
	// an object {message} on Qwen's failed result, which has no result
	// text.
	Error json.RawMessage `json:"error"`
	Usage *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
	ModelUsage map[string]json.RawMessage `json:"modelUsage"`
}

// claudeBlock is one item of a message's content.
type claudeBlock struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	IsError bool   `json:"is_error"`
}

func (ev *claudeEvent) blocks() []claudeBlock {
	var bs []claudeBlock
	if len(ev.Message.Content) > 0 && ev.Message.Content[0] == '[' {
		_ = json.Unmarshal(ev.Message.Content, &bs) // a string content has no blocks
	}
	return bs
}

// claudeParser reads Claude Code's stream-json. The turn succeeded only
// when the last result event says is_error false: an API error arrives as
// subtype "success" with is_error true.
type claudeParser struct {
	u      usage.Usage
	result *claudeEvent
}

func (p *claudeParser) line(line []byte, _ bool) {
	var ev claudeEvent
	if !jsonLine(line, &ev) {
		return
	}
	if ev.SessionID != "" {
		p.u.SessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Subtype == "init" && ev.Model != "" {
			p.u.Model = ev.Model
		}
	case "assistant":
		if m := ev.Message.Model; m != "" && m != "<synthetic>" && p.u.Model == "" {
			p.u.Model = m
		}
	case "user":
		for _, b := range ev.blocks() {
			if b.Type == "tool_result" && b.IsError {
				p.u.ToolErrors++
			}
		}
	case "result":
		p.result = &ev
		ev.addUsage(&p.u)
		if p.u.Model == "" {
			for m := range ev.ModelUsage {
				p.u.Model = m
				break
			}
		}
	}
}

func (p *claudeParser) finish(o outcome) (string, bool, string) {
	if failure := resultFailure(p.result, o); failure != "" {
		return "", false, failure
	}
	var t textBuf
	t.WriteString(p.result.Result)
	return t.String(), t.truncated, ""
}

// addUsage records a result event's usage and cost (Claude's, Qwen's and
// Cursor's alike) in u.
func (r *claudeEvent) addUsage(u *usage.Usage) {
	if r.Usage != nil {
		// Cache writes are input the model processed; cache reads are
		// counted apart because they are billed apart.
		u.InputTokens = usage.Int(r.Usage.InputTokens + r.Usage.CacheCreationInputTokens)
		u.OutputTokens = usage.Int(r.Usage.OutputTokens)
		u.CacheReadTokens = usage.Int(r.Usage.CacheReadInputTokens)
	}
	if r.TotalCostUSD != nil {
		u.CostUSD = cliCost(*r.TotalCostUSD, u.Tokens())
	}
}

// cliCost is the cost a CLI reported, or nil when it is zero for tokens
// spent: a CLI that does not know the model's price says 0, which is not
// a cost but an unknown one (pricing may fill it).
func cliCost(cost float64, tokens int64) *float64 {
	if cost == 0 && tokens > 0 {
		return nil
	}
	return usage.Float(cost)
}

// resultFailure says why a stream-json turn failed, judged by its last
// result event (r; nil when none came), or "" when it succeeded.
func resultFailure(r *claudeEvent, o outcome) string {
	switch {
	case r == nil:
		return noResult("result", o.lastOut)
	case r.IsError || (r.Subtype != "" && r.Subtype != "success"):
		return claudeFailure(r)
	}
	return ""
}

func claudeFailure(r *claudeEvent) string {
	msg := strings.TrimSpace(r.Result)
	if msg == "" && len(r.Error) > 0 && r.Error[0] == '{' {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(r.Error, &e) // no message: the subtype says it
		msg = strings.TrimSpace(e.Message)
	}
	if msg == "" {
		msg = "result " + r.Subtype
	}
	if r.APIErrorStatus != nil {
		msg = fmt.Sprintf("%s (api status %d)", msg, *r.APIErrorStatus)
	}
	return firstLine(msg, 500)
}

func (p *claudeParser) usage() usage.Usage { return p.u }

// firstLine keeps an error message to one line of at most max bytes.
func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > max {
		s = validUTF8Prefix(s[:max]) + "…"
	}
	return s
}
