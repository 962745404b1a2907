package adapter

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/usage"
)

// GitHub Copilot CLI (checked against 1.0.102, see testdata/FLAGS.md):
//
//	copilot --prompt=PROMPT --output-format json --no-auto-update --usage-output-file F [--model M] [args…] [MCP] POSTURE
//
// --prompt=… is -p joined to its value, so a prompt starting with "-"
// stays a value. The model endpoint is the user's: a GitHub login, or
// BYOK (COPILOT_PROVIDER_BASE_URL, COPILOT_PROVIDER_API_KEY, COPILOT_MODEL,
// COPILOT_OFFLINE=true) in the adapter's env. Its JSON lines carry no
// token counts; --usage-output-file writes them at the end of the run.

// copilotEnv turns off the self-update (besides --no-auto-update, which
// keeps a previously downloaded newer version from running instead).
var copilotEnv = []string{"COPILOT_AUTO_UPDATE=false"}

// copilotMCP registers nerve's MCP server for the turn, on top of the
// user's COPILOT_HOME/mcp-config.json. Its tools reach the model as
// nerve-TOOL.
func copilotMCP(s *MCPServer, perm string) []string {
	if s == nil {
		return nil
	}
	srv := mcpStdioJSON(s, perm, map[string]any{"type": "stdio", "tools": []string{"*"}})
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{MCPName: srv}})
	return []string{"--additional-mcp-config=" + string(b)}
}

// copilotPosture maps a posture to Copilot's tool permissions. In -p mode
// Copilot runs what it judges read-only (reading files, echo, MCP tools
// marked readOnlyHint) and denies anything needing approval at once, the
// turn going on. Its shell rules match a command's first word only
// (shell(nerve:*) would allow every nerve command), so no shell command is
// allowed beyond Copilot's own read-only ones: nerve's queries are its MCP
// tools.
func copilotPosture(perm string, mcp *MCPServer) []string {
	if perm == PermFull {
		return []string{"--allow-all"}
	}
	var args []string
	if perm == PermWorkspace {
		args = append(args, "--allow-tool=write")
	} else {
		args = append(args, "--deny-tool=write")
	}
	if mcp != nil {
		// The server itself offers only the read tools under read-only.
		args = append(args, "--allow-tool="+MCPName)
	}
	return args
}

func buildCopilot(a *cliAdapter, req Request) (*invocation, error) {
	if len(req.Prompt) > maxArgBytes {
		return nil, fmt.Errorf("the prompt is %d bytes, longer than a command line takes (128 KiB), and copilot -p reads no prompt from stdin", len(req.Prompt))
	}
	dir, err := os.MkdirTemp("", "nerve-copilot-")
	if err != nil {
		return nil, err
	}
	usageFile := filepath.Join(dir, "usage.json")
	args := []string{"--prompt=" + req.Prompt, "--output-format", "json", "--no-auto-update", "--usage-output-file", usageFile}
	if a.cfg.Model != "" {
		args = append(args, "--model", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, copilotMCP(req.MCP, a.info.Permissions)...)
	args = append(args, copilotPosture(a.info.Permissions, req.MCP)...)
	return &invocation{args: args, env: copilotEnv, parser: &copilotParser{usageFile: usageFile},
		cleanup: func() { os.RemoveAll(dir) }, binds: []sandbox.Bind{{Src: dir, Dst: dir, Write: true}}}, nil
}

type copilotEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId"`
	ExitCode  *int   `json:"exitCode"`
	Data      struct {
		Content    string `json:"content"`
		Model      string `json:"model"`
		Success    *bool  `json:"success"`
		Message    string `json:"message"`
		ErrorType  string `json:"errorType"`
		StatusCode int    `json:"statusCode"`
	} `json:"data"`
}

// copilotParser reads copilot --output-format json. The answer is the
// last non-empty assistant.message; the turn succeeded when the final
// result event says exitCode 0 and no session.error came.
type copilotParser struct {
	usageFile string
	u         usage.Usage
	answer    textBuf
	result    *copilotEvent
	err       string
	read      bool // the usage file was read
}

func (p *copilotParser) line(line []byte, _ bool) {
	var ev copilotEvent
	if !jsonLine(line, &ev) {
		return
	}
	switch ev.Type {
	case "assistant.message":
		if ev.Data.Model != "" {
			p.u.Model = ev.Data.Model
		}
		if ev.Data.Content != "" {
			p.answer.Reset()
			p.answer.WriteString(ev.Data.Content)
		}
	case "tool.execution_complete":
		if ev.Data.Success != nil && !*ev.Data.Success {
			p.u.ToolErrors++
		}
	case "session.error":
		p.err = ev.Data.Message
		if p.err == "" {
			p.err = "session error " + ev.Data.ErrorType
		}
		if ev.Data.StatusCode != 0 {
			p.err = fmt.Sprintf("%s (api status %d)", p.err, ev.Data.StatusCode)
		}
	case "result":
		p.result = &ev
		p.u.SessionID = ev.SessionID
	}
}

func (p *copilotParser) finish(o outcome) (string, bool, string) {
	switch {
	case p.err != "":
		return "", false, firstLine(p.err, 500)
	case p.result == nil:
		return "", false, noResult("result", o.lastOut)
	case p.result.ExitCode == nil || *p.result.ExitCode != 0:
		return "", false, fmt.Sprintf("result with exit code %d", val64(p.result.ExitCode))
	}
	return p.answer.String(), p.answer.truncated, ""
}

// usage adds the tokens of the usage file, which Copilot writes as it
// exits: modelMetrics.MODEL.usage per model.
func (p *copilotParser) usage() usage.Usage {
	if p.read || p.usageFile == "" {
		return p.u
	}
	p.read = true
	b, err := os.ReadFile(p.usageFile)
	if err != nil {
		return p.u
	}
	var f struct {
		ModelMetrics map[string]struct {
			Usage struct {
				InputTokens      int64 `json:"inputTokens"`
				OutputTokens     int64 `json:"outputTokens"`
				CacheReadTokens  int64 `json:"cacheReadTokens"`
				CacheWriteTokens int64 `json:"cacheWriteTokens"`
			} `json:"usage"`
		} `json:"modelMetrics"`
	}
	if json.Unmarshal(b, &f) != nil || len(f.ModelMetrics) == 0 {
		return p.u
	}
	var in, out, cached int64
	for m, mm := range f.ModelMetrics {
		in += mm.Usage.InputTokens + mm.Usage.CacheWriteTokens
		out += mm.Usage.OutputTokens
		cached += mm.Usage.CacheReadTokens
		if p.u.Model == "" {
			p.u.Model = m
		}
	}
	p.u.InputTokens, p.u.OutputTokens, p.u.CacheReadTokens = usage.Int(in), usage.Int(out), usage.Int(cached)
	return p.u
}

// val64 is an optional int, 0 when absent.
func val64(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
