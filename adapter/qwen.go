package adapter

import (
	"encoding/json"
)

// Qwen Code (checked against 0.24.4, see testdata/FLAGS.md):
//
//	qwen --prompt=PROMPT --output-format stream-json [-m M] [args…] [--mcp-config JSON] POSTURE
//
// --prompt=… is -p in its long form, joined so that a prompt starting with
// "-" stays a value; Qwen does not read a positional prompt after "--".
// --help calls -p deprecated in favour of the positional prompt, which a
// prompt starting with "-" would break.
// The model endpoint is the user's: OPENAI_BASE_URL, OPENAI_API_KEY and
// OPENAI_MODEL in the adapter's env (or the user's ~/.qwen settings).
// Qwen's stream-json is Claude Code's (system init, assistant, user,
// result with is_error and usage), so Claude's parser reads it.

// qwenQueryTools are nerve's query commands as Qwen's permission rules
// name them (a word-bounded command prefix).
var qwenQueryTools = []string{"Bash(nerve thread messages *)", "Bash(nerve knowledge query *)"}

// qwenEnv turns off usage statistics and telemetry (Qwen's own
// variables; auto-update is settings-only and not run headless).
var qwenEnv = []string{"QWEN_USAGE_STATISTICS_ENABLED=false", "QWEN_TELEMETRY_ENABLED=false"}

// qwenMCP registers nerve's MCP server for the turn through --mcp-config,
// which takes the JSON itself. The server inherits Qwen's environment.
func qwenMCP(s *MCPServer, perm string) []string {
	if s == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{MCPName: mcpStdioJSON(s, perm, nil)}})
	return []string{"--mcp-config", string(b)}
}

// qwenPosture maps a posture to Qwen's approval modes. Headless Qwen
// denies a tool that would ask for approval, so --allowed-tools lists what
// workspace and read-only may run without asking: nerve's query commands
// and nerve's MCP tools (mcp__nerve__TOOL).
func qwenPosture(perm string, mcp *MCPServer) []string {
	if perm == PermFull {
		return []string{"--yolo"}
	}
	mode := "auto-edit"
	if perm == PermReadOnly {
		mode = "plan"
	}
	args := []string{"--approval-mode", mode}
	allowed := append([]string(nil), qwenQueryTools...)
	if mcp != nil {
		for _, t := range mcpTools(perm) {
			allowed = append(allowed, "mcp__"+MCPName+"__"+t)
		}
	}
	// One flag per tool: --allowed-tools is an array flag and would take
	// the words after it, the prompt too.
	for _, t := range allowed {
		args = append(args, "--allowed-tools="+t)
	}
	return args
}

func buildQwen(a *cliAdapter, req Request) (*invocation, error) {
	inv := &invocation{parser: &claudeParser{}, env: qwenEnv}
	if req.MCP != nil {
		// Qwen discovers MCP servers while the first model call is under
		// way, so nerve's tools may be missing from it; this makes the
		// turn wait for them.
		inv.env = append(append([]string(nil), qwenEnv...), "QWEN_CODE_LEGACY_MCP_BLOCKING=1")
	}
	prompt := req.Prompt
	if len(prompt) > maxArgBytes {
		// Qwen reads stdin and appends the -p text to it.
		inv.stdin, prompt = &req.Prompt, " "
	}
	args := []string{"--prompt=" + prompt, "--output-format", "stream-json"}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, qwenMCP(req.MCP, a.info.Permissions)...)
	args = append(args, qwenPosture(a.info.Permissions, req.MCP)...)
	inv.args = args
	return inv, nil
}
