package adapter

import (
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Codex (checked against 0.169.0, see testdata/FLAGS.md):
//
//	codex exec --json --skip-git-repo-check [-m M] -c … [args…] [-c mcp_servers.nerve=…] POSTURE -- PROMPT
//
// The prompt goes after "--" so that a prompt such as "review" is not taken
// for the exec subcommand of that name. stdin is /dev/null: codex reads
// stdin to EOF and appends it to the prompt.

// codexQuiet turns off update checks and analytics. Codex reads no
// environment variables for these, only its config, which -c overrides.
var codexQuiet = []string{
	"-c", "check_for_update_on_startup=false",
	"-c", "analytics.enabled=false",
	"-c", "feedback.enabled=false",
	"-c", "features.in_app_updates=false",
}

// codexMCP registers nerve's MCP server for the turn with one -c
// override of mcp_servers.nerve. Codex hands a server only an allow-list
// of its environment, so the turn's variables are given in env; and
// `codex exec` refuses any MCP call that needs approval ("approval policy
// is never") unless the server's tools are approved: the server itself
// offers only the read tools under read-only.
func codexMCP(s *MCPServer, perm string) []string {
	if s == nil {
		return nil
	}
	env := mcpEnvMap(s)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + tomlString(env[k])
	}
	v := "mcp_servers." + MCPName + "={command=" + tomlString(s.Command) +
		", args=" + tomlStrings(mcpArgs(s, perm)) +
		", env={" + strings.Join(pairs, ", ") + "}" +
		", default_tools_approval_mode=\"approve\"}"
	return []string{"-c", v}
}

func codexPosture(perm string) []string {
	// A login shell may reset PATH and lose the nerve binary that the
	// query commands need, in every posture.
	noLogin := []string{"-c", "allow_login_shell=false"}
	switch perm {
	case PermFull:
		return append([]string{"--dangerously-bypass-approvals-and-sandbox"}, noLogin...)
	case PermReadOnly:
		return append([]string{"--sandbox", "read-only"}, noLogin...)
	default:
		return append([]string{"--sandbox", "workspace-write"}, noLogin...)
	}
}

func buildCodex(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"exec", "--json", "--skip-git-repo-check"}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, codexQuiet...)
	args = append(args, a.cfg.Args...)
	args = append(args, codexMCP(req.MCP, a.info.Permissions)...)
	args = append(args, codexPosture(a.info.Permissions)...)
	inv := &invocation{parser: &codexParser{}}
	if len(req.Prompt) > maxArgBytes {
		// A prompt of "-" means: read it from stdin.
		args = append(args, "--", "-")
		inv.stdin = &req.Prompt
	} else {
		args = append(args, "--", req.Prompt)
	}
	inv.args = args
	return inv, nil
}

type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Item     *struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Message  string `json:"message"`
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
	} `json:"item"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// codexParser reads codex exec --json. The answer is the last
// agent_message item; the turn succeeded when turn.completed came and no
// turn.failed after it.
type codexParser struct {
	u         usage.Usage
	answer    textBuf
	completed bool
	failed    string
	lastError string
}

func (p *codexParser) line(line []byte, _ bool) {
	var ev codexEvent
	if !jsonLine(line, &ev) {
		return
	}
	switch ev.Type {
	case "thread.started":
		p.u.SessionID = ev.ThreadID
	case "item.completed":
		it := ev.Item
		if it == nil {
			return
		}
		switch it.Type {
		case "agent_message":
			p.answer.Reset()
			p.answer.WriteString(it.Text)
		case "command_execution":
			if it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0) {
				p.u.ToolErrors++
			}
		case "mcp_tool_call", "file_change", "web_search":
			if it.Status == "failed" {
				p.u.ToolErrors++
			}
		}
	case "turn.completed":
		p.completed, p.failed = true, ""
		if ev.Usage != nil {
			// Codex counts cached input within input_tokens; nerve
			// counts it apart (it is billed apart).
			u := ev.Usage
			p.u.InputTokens = usage.Int(val(p.u.InputTokens) + u.InputTokens - u.CachedInputTokens)
			p.u.CacheReadTokens = usage.Int(val(p.u.CacheReadTokens) + u.CachedInputTokens)
			p.u.OutputTokens = usage.Int(val(p.u.OutputTokens) + u.OutputTokens)
		}
	case "turn.failed":
		p.completed = false
		p.failed = "turn failed"
		if ev.Error != nil && ev.Error.Message != "" {
			p.failed = ev.Error.Message
		}
	case "error":
		// Retries print "Reconnecting… n/5" errors and may still succeed;
		// keep the message in case no final event follows.
		p.lastError = ev.Message
	}
}

func (p *codexParser) finish(o outcome) (string, bool, string) {
	switch {
	case p.failed != "":
		return "", false, firstLine(p.failed, 500)
	case p.completed:
		return p.answer.String(), p.answer.truncated, ""
	case p.lastError != "" && !strings.HasPrefix(p.lastError, "Reconnecting"):
		return "", false, "no turn.completed event; last error: " + firstLine(p.lastError, 500)
	default:
		return "", false, noResult("turn.completed", o.lastOut)
	}
}

func (p *codexParser) usage() usage.Usage { return p.u }
