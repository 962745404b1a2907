package adapter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/usage"
)

// Gemini CLI (checked against 0.61.0, see testdata/FLAGS.md):
//
//	gemini --prompt=PROMPT --output-format stream-json --skip-trust [-m M] [args…] POSTURE
//
// --prompt=… is -p in its long form, joined so that a prompt starting with
// "-" stays a value. --skip-trust: a folder that is new to Gemini is
// untrusted, and headless Gemini then exits 55 without a word on stdout.

// geminiQueryPrefixes are the shell commands the policy file allows.
var geminiQueryPrefixes = []string{"nerve thread messages", "nerve knowledge query"}

// geminiPolicy is the --policy file of the workspace and read-only
// postures: auto_edit does not offer the shell tool headless and plan mode
// removes it, so this allows it for exactly nerve's query commands.
// Everything else stays ask_user, which headless means deny.
//
// With nerve's MCP server registered, a rule per tool allows the tools of
// the posture: auto_edit and plan offer no MCP tool headless unless a rule
// allows it, and a rule offers exactly the tools it names.
func geminiPolicy(mcp *MCPServer, perm string) string {
	var b strings.Builder
	b.WriteString("# Written by nerve for one turn.\n" +
		"[[rule]]\n" +
		"toolName = \"run_shell_command\"\n" +
		"commandPrefix = " + tomlStrings(geminiQueryPrefixes) + "\n" +
		"decision = \"allow\"\n" +
		"priority = 900\n")
	if mcp != nil {
		for _, t := range mcpTools(perm) {
			fmt.Fprintf(&b, "\n[[rule]]\nmcpName = %s\ntoolName = %s\ndecision = \"allow\"\npriority = 900\n",
				tomlString(MCPName), tomlString(t))
		}
	}
	return b.String()
}

func buildGemini(a *cliAdapter, req Request) (inv *invocation, err error) {
	inv = &invocation{parser: &geminiParser{}}
	prompt := req.Prompt
	if len(prompt) > maxArgBytes {
		// Gemini reads stdin and appends the -p text to it.
		inv.stdin, prompt = &req.Prompt, " "
	}
	args := []string{"--prompt=" + prompt, "--output-format", "stream-json", "--skip-trust"}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	// Usage statistics and auto-update are settings-only in Gemini, and it
	// ignores a system-defaults file that is not owned by root, so only
	// telemetry can be turned off from here.
	inv.env = []string{"GEMINI_TELEMETRY_ENABLED=false"}
	perm := a.info.Permissions
	if perm == PermFull && req.MCP == nil {
		inv.args = append(args, "--yolo")
		return inv, nil
	}
	dir, err := os.MkdirTemp("", "nerve-gemini-")
	if err != nil {
		return nil, fmt.Errorf("create gemini turn dir: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	inv.cleanup = cleanup
	inv.binds = []sandbox.Bind{{Src: dir, Dst: dir, Write: true}}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if req.MCP != nil {
		if _, ok := a.cfg.Env["GEMINI_CLI_HOME"]; ok {
			// The adapter's env would override the turn's home.
			return nil, fmt.Errorf("nerve sets GEMINI_CLI_HOME for each turn, to add its MCP server: set HOME in the adapter's env instead")
		}
		home, err := geminiTurnHome(dir, geminiUserHome(a.cfg.Env), req.MCP, perm, req.onHost)
		if err != nil {
			return nil, err
		}
		inv.env = append(inv.env, "GEMINI_CLI_HOME="+home)
	}
	if perm == PermFull {
		inv.args = append(args, "--yolo")
		return inv, nil
	}
	p := filepath.Join(dir, "nerve-policy.toml")
	if err := os.WriteFile(p, []byte(geminiPolicy(req.MCP, perm)), 0o600); err != nil {
		return nil, fmt.Errorf("write gemini policy: %w", err)
	}
	// Plan mode takes the shell tool away entirely; the policy gives it
	// back for the query commands only, so read-only can still use them.
	mode := "auto_edit"
	if perm == PermReadOnly {
		mode = "plan"
	}
	inv.args = append(args, "--approval-mode", mode, "--policy", p)
	return inv, nil
}

type geminiEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Status    string `json:"status"`
	Message   string `json:"message"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		Cached       int64 `json:"cached"`
		Models       map[string]struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"models"`
	} `json:"stats"`
}

// geminiParser reads Gemini's stream-json: the answer is the assistant
// deltas concatenated; only a final result with status success counts.
// SIGTERM makes Gemini exit 0 with no result, so the exit code is ignored.
type geminiParser struct {
	u         usage.Usage
	text      textBuf
	result    *geminiEvent
	lastError string
}

func (p *geminiParser) line(line []byte, _ bool) {
	var ev geminiEvent
	if !jsonLine(line, &ev) {
		return
	}
	switch ev.Type {
	case "init":
		p.u.SessionID = ev.SessionID
		if ev.Model != "auto" {
			p.u.Model = ev.Model
		}
	case "message":
		if ev.Role == "assistant" {
			p.text.WriteString(ev.Content)
		}
	case "tool_result":
		if ev.Status != "success" {
			p.u.ToolErrors++
		}
	case "error":
		p.lastError = ev.Message
	case "result":
		p.result = &ev
		if s := ev.Stats; s != nil {
			// Gemini counts cached input within input_tokens; nerve
			// counts it apart (it is billed apart).
			p.u.InputTokens = usage.Int(s.InputTokens - s.Cached)
			p.u.OutputTokens, p.u.CacheReadTokens = usage.Int(s.OutputTokens), usage.Int(s.Cached)
			// With model "auto" a small router model runs too; the model
			// that answered is the one that used the most tokens.
			var best int64 = -1
			for m, st := range s.Models {
				if st.TotalTokens > best || (st.TotalTokens == best && m < p.u.Model) {
					best, p.u.Model = st.TotalTokens, m
				}
			}
		}
	}
}

func (p *geminiParser) finish(o outcome) (string, bool, string) {
	r := p.result
	switch {
	case r == nil && p.lastError != "":
		return "", false, "no result event; last error: " + firstLine(p.lastError, 500)
	case r == nil:
		return "", false, noResult("result", o.lastOut)
	case r.Status != "success":
		msg := "result status " + r.Status
		if r.Error != nil && r.Error.Message != "" {
			msg = r.Error.Message
		}
		return "", false, firstLine(msg, 500)
	}
	return p.text.String(), p.text.truncated, ""
}

func (p *geminiParser) usage() usage.Usage { return p.u }
