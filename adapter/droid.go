package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/usage"
)

// Factory's Droid (checked against 0.225.2, see testdata/FLAGS.md):
//
//	droid exec -o stream-json [-m MODEL] [args…] POSTURE -- PROMPT   (or -f FILE when long)
//
// The model is the user's: Factory's service after `droid login` or
// FACTORY_API_KEY, or a custom model in ~/.factory/config.json (model id
// custom:NAME-INDEX). Droid takes MCP servers only from files
// (~/.factory/mcp.json, the project's .factory/mcp.json), so for a turn
// with nerve's server the adapter gives it a home of its own
// (FACTORY_HOME_OVERRIDE) whose .factory links every entry of the user's
// but mcp.json, which holds nerve's server alone.
//
// Postures are Droid's autonomy levels, which judge a command by the risk
// level the model declares for it: read-only is the default (read-only
// commands), workspace is --auto low (file edits, low-risk commands),
// full is --skip-permissions-unsafe. A command above the level ends the
// whole exec with an error.

var droidEnv = []string{"FACTORY_DROID_AUTO_UPDATE_ENABLED=false"}

func droidPosture(perm string) []string {
	switch perm {
	case PermFull:
		return []string{"--skip-permissions-unsafe"}
	case PermReadOnly:
		return nil
	default:
		return []string{"--auto", "low"}
	}
}

func buildDroid(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"exec", "-o", "stream-json"}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, droidPosture(a.info.Permissions)...)
	inv := &invocation{env: droidEnv, parser: &droidParser{}}
	var dir string
	mkdir := func() error {
		if dir != "" {
			return nil
		}
		var err error
		dir, err = os.MkdirTemp("", "nerve-droid-")
		inv.cleanup = func() { os.RemoveAll(dir) }
		inv.binds = append(inv.binds, sandbox.Bind{Src: dir, Dst: dir, Write: true})
		return err
	}
	if req.MCP != nil {
		if err := mkdir(); err != nil {
			return nil, err
		}
		env := mergeEnv(baseEnv(req), sortedEnv(a.cfg.Env), req.Env)
		home := envValue(env, "FACTORY_HOME_OVERRIDE")
		if home == "" {
			home = envValue(env, "HOME")
		}
		// In a sandbox the CLI's .factory is its state directory: read
		// where it lies on the host, link where the CLI sees it.
		factory := filepath.Join(home, ".factory")
		if err := droidHome(req.onHost(factory), factory, filepath.Join(dir, "home", ".factory"), req.MCP, a.info.Permissions); err != nil {
			inv.cleanup()
			return nil, err
		}
		inv.env = append([]string{"FACTORY_HOME_OVERRIDE=" + filepath.Join(dir, "home")}, droidEnv...)
	}
	if len(req.Prompt) > maxArgBytes {
		if err := mkdir(); err != nil {
			return nil, err
		}
		f := filepath.Join(dir, "prompt.txt")
		if err := os.WriteFile(f, []byte(req.Prompt), 0o600); err != nil {
			inv.cleanup()
			return nil, err
		}
		args = append(args, "-f", f)
	} else {
		args = append(args, "--", req.Prompt)
	}
	inv.args = args
	return inv, nil
}

// droidStateDirs are the directories Droid writes its state in under
// .factory: made in the user's before it is linked, so that state is not
// left in the turn's home, which goes with the turn.
var droidStateDirs = []string{"sessions", "logs", "cache", "state", "telemetry", "droids", "certs", "temp"}

// droidHome makes dst a .factory directory that links every entry of the
// user's (src, which the CLI sees at seen; sessions, logs and settings
// stay theirs) but mcp.json, which registers nerve's server alone.
func droidHome(src, seen, dst string, s *MCPServer, perm string) error {
	for _, d := range append([]string{""}, droidStateDirs...) {
		if err := os.MkdirAll(filepath.Join(src, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		if e.Name() == "mcp.json" {
			continue
		}
		if err := os.Symlink(filepath.Join(seen, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	srv := mcpStdioJSON(s, perm, map[string]any{"type": "stdio", "disabled": false})
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{MCPName: srv}})
	return os.WriteFile(filepath.Join(dst, "mcp.json"), b, 0o600)
}

type droidEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	Role      string `json:"role"`
	Text      string `json:"text"`
	Model     string `json:"model"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"isError"`
	FinalText string `json:"finalText"`
	Message   string `json:"message"`
	Source    string `json:"source"`
	Usage     *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

// droidParser reads droid exec -o stream-json. The turn succeeded when
// the completion event came and no error event; its finalText is the
// answer. An error (the API's, then "Exec failed") comes instead of it.
type droidParser struct {
	u          usage.Usage
	answer     textBuf
	completion bool
	errs       []string
}

func (p *droidParser) line(line []byte, _ bool) {
	var ev droidEvent
	if !jsonLine(line, &ev) {
		return
	}
	if ev.SessionID != "" {
		p.u.SessionID = ev.SessionID
	}
	switch ev.Type {
	case "system":
		if ev.Model != "" {
			p.u.Model = ev.Model
		}
	case "tool_result":
		if ev.IsError {
			p.u.ToolErrors++
		}
	case "completion":
		p.completion = true
		p.answer.Reset()
		p.answer.WriteString(ev.FinalText)
		if u := ev.Usage; u != nil {
			p.u.InputTokens = usage.Int(u.InputTokens + u.CacheCreationInputTokens)
			p.u.OutputTokens = usage.Int(u.OutputTokens)
			p.u.CacheReadTokens = usage.Int(u.CacheReadInputTokens)
		}
	case "error":
		if ev.Message != "" {
			p.errs = append(p.errs, ev.Message)
		}
	}
}

func (p *droidParser) finish(o outcome) (string, bool, string) {
	switch {
	case len(p.errs) > 0:
		// The first error is the cause ("429 rate limited"); the last
		// is droid's own summary ("Exec failed").
		msg := p.errs[0]
		if len(p.errs) > 1 && p.errs[len(p.errs)-1] != msg {
			msg += "; " + p.errs[len(p.errs)-1]
		}
		return "", false, firstLine(msg, 500)
	case !p.completion:
		return "", false, noResult("completion", o.lastOut)
	}
	return p.answer.String(), p.answer.truncated, ""
}

func (p *droidParser) usage() usage.Usage { return p.u }
