package adapter

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/nerve-agents/nerve/internal/usage"
)

// opencode (checked against 1.18.33, see testdata/FLAGS.md):
//
//	opencode run --format json [-m PROVIDER/MODEL] [args…] [--auto] -- PROMPT
//
// The model endpoint is the user's: a provider in their opencode config
// (~/.config/opencode/opencode.json, or a file named by OPENCODE_CONFIG in
// the adapter's env). nerve adds, for the turn, a config of its own in
// OPENCODE_CONFIG_CONTENT, which opencode merges over every other: nerve's
// MCP server and the posture's permissions.

// opencodeQueryCommands are nerve's query commands as opencode's bash
// permission patterns.
var opencodeQueryCommands = []string{"nerve thread messages*", "nerve knowledge query*"}

// opencodeConfig is the turn's config: permissions per posture (headless
// opencode rejects what would ask) and nerve's MCP server, whose tools
// reach the model as nerve_TOOL.
func opencodeConfig(s *MCPServer, perm string) map[string]any {
	cfg := map[string]any{"autoupdate": false, "share": "disabled"}
	bash := map[string]any{"*": "deny"}
	for _, c := range opencodeQueryCommands {
		bash[c] = "allow"
	}
	switch perm {
	case PermFull:
		// --auto approves whatever is not denied.
	case PermReadOnly:
		cfg["permission"] = map[string]any{"edit": "deny", "bash": bash, "webfetch": "deny", "external_directory": "deny"}
	default:
		cfg["permission"] = map[string]any{"edit": "allow", "bash": bash, "webfetch": "deny", "external_directory": "deny"}
	}
	if s != nil {
		srv := map[string]any{"type": "local", "command": append([]string{s.Command}, mcpArgs(s, perm)...), "enabled": true}
		if env := mcpEnvMap(s); len(env) > 0 {
			srv["environment"] = env
		}
		cfg["mcp"] = map[string]any{MCPName: srv}
		if p, ok := cfg["permission"].(map[string]any); ok {
			for _, t := range mcpTools(perm) {
				p[MCPName+"_"+t] = "allow"
			}
		}
	}
	return cfg
}

func buildOpencode(a *cliAdapter, req Request) (*invocation, error) {
	return buildOpencodeLike(a, req, "OPENCODE", "opencode")
}

// buildOpencodeLike builds opencode's command line, and that of its forks
// (kilo), whose variables are named PREFIX_CONFIG_CONTENT and the like.
func buildOpencodeLike(a *cliAdapter, req Request, prefix, cli string) (*invocation, error) {
	content := prefix + "_CONFIG_CONTENT"
	if _, ok := a.cfg.Env[content]; ok {
		return nil, fmt.Errorf("nerve sets %s for each turn: put the adapter's %s config in a file and name it with %s_CONFIG", content, cli, prefix)
	}
	cfg := opencodeConfig(req.MCP, a.info.Permissions)
	if own := os.Getenv(content); own != "" {
		// The daemon's own inline config: keep it, under nerve's keys.
		var base map[string]any
		if err := json.Unmarshal([]byte(own), &base); err != nil {
			return nil, fmt.Errorf("read %s: %w", content, err)
		}
		for k, v := range cfg {
			base[k] = v
		}
		cfg = base
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--format", "json"}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	if a.info.Permissions == PermFull {
		args = append(args, "--auto")
	}
	inv := &invocation{parser: &opencodeParser{}, env: []string{
		content + "=" + string(b),
		prefix + "_DISABLE_AUTOUPDATE=true",
	}}
	if len(req.Prompt) > maxArgBytes {
		return nil, fmt.Errorf("the prompt is %d bytes, longer than a command line takes (128 KiB), and %s reads no prompt from stdin", len(req.Prompt), cli)
	}
	inv.args = append(args, "--", req.Prompt)
	return inv, nil
}

type opencodeEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      *struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Reason string `json:"reason"`
		Tool   string `json:"tool"`
		State  *struct {
			Status string `json:"status"`
		} `json:"state"`
		Tokens *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
			Cache  struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost float64 `json:"cost"`
	} `json:"part"`
	Error json.RawMessage `json:"error"`
}

// opencodeParser reads opencode run --format json. Each model call is a
// step (step_start … step_finish with its tokens and cost); the answer is
// the text of the last step, and the turn succeeded when the last step
// finished for a reason other than a tool call or an error and no error
// event came after it.
type opencodeParser struct {
	u        usage.Usage
	cost     float64 // the steps' costs so far
	text     textBuf
	finished string // the last step_finish's reason; "" while a step runs
	err      string
}

func (p *opencodeParser) line(line []byte, _ bool) {
	var ev opencodeEvent
	if !jsonLine(line, &ev) {
		return
	}
	if ev.SessionID != "" {
		p.u.SessionID = ev.SessionID
	}
	part := ev.Part
	switch ev.Type {
	case "step_start":
		p.text.Reset()
		p.finished = ""
	case "text":
		if part != nil {
			p.text.WriteString(part.Text)
		}
	case "tool_use":
		if part != nil && part.State != nil && part.State.Status == "error" {
			p.u.ToolErrors++
		}
	case "step_finish":
		if part == nil {
			return
		}
		p.finished = part.Reason
		if part.Reason == "" {
			p.finished = "stop"
		}
		if t := part.Tokens; t != nil {
			p.u.InputTokens = usage.Int(val(p.u.InputTokens) + t.Input + t.Cache.Write)
			p.u.OutputTokens = usage.Int(val(p.u.OutputTokens) + t.Output)
			p.u.CacheReadTokens = usage.Int(val(p.u.CacheReadTokens) + t.Cache.Read)
		}
		p.cost += part.Cost
		p.u.CostUSD = cliCost(p.cost, p.u.Tokens())
	case "error":
		p.err = opencodeError(ev.Error)
	}
}

// opencodeError is an error event's message:
// {name, data: {message, statusCode}}.
func opencodeError(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message    string `json:"message"`
			StatusCode int    `json:"statusCode"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return firstLine(string(raw), 500)
	}
	msg := e.Data.Message
	if e.Name != "" && msg != "" {
		msg = e.Name + ": " + msg
	} else if msg == "" {
		msg = e.Name
	}
	if msg == "" {
		msg = "error event"
	}
	if e.Data.StatusCode != 0 {
		msg = fmt.Sprintf("%s (api status %d)", msg, e.Data.StatusCode)
	}
	return firstLine(msg, 500)
}

func (p *opencodeParser) finish(o outcome) (string, bool, string) {
	switch {
	case p.err != "":
		return "", false, p.err
	case p.finished == "":
		return "", false, noResult("step_finish", o.lastOut)
	case p.finished == "tool-calls" || p.finished == "error":
		return "", false, "the last step ended with " + p.finished + ", not an answer"
	}
	return p.text.String(), p.text.truncated, ""
}

func (p *opencodeParser) usage() usage.Usage { return p.u }
