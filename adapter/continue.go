package adapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/usage"
)

// Continue's CLI, cn (checked against 1.5.47, see testdata/FLAGS.md):
//
//	cn -p --format json [args…] [--config TURN.yaml] POSTURE -- PROMPT
//
// The model is the user's config.yaml (CONTINUE_GLOBAL_DIR, default
// ~/.continue). cn takes local MCP servers only from a config file, so for
// a turn with nerve's server the adapter copies that config, adds nerve's
// server to its mcpServers and passes the copy with --config (not when
// args name a --config of their own, nor when there is no local config.yaml). Tool names are bare
// (thread_messages).
//
// Postures: full is --auto. Its Bash runs a login shell, whose PATH loses
// the nerve binary, and allows any command, so workspace and read-only
// exclude it (and Fetch): workspace allows the edit tools, read-only is
// --readonly (plan mode); nerve's MCP tools are allowed by default.
//
// There is no event stream: --format json prints one object at the end,
// {"response", "status": "success"}, or the answer itself when it is
// valid JSON; an error is {"status": "error", "message"} on stderr with
// exit 1. cn exits 0 with no output on SIGTERM, so a missing object is a
// failure.

var continueEnv = []string{"CONTINUE_METRICS_ENABLED=0", "CONTINUE_CLI_ENABLE_TELEMETRY=0"}

func continuePosture(perm string) []string {
	switch perm {
	case PermFull:
		return []string{"--auto"}
	case PermReadOnly:
		return []string{"--readonly", "--exclude", "Bash", "--exclude", "Fetch"}
	default:
		return []string{"--allow", "Edit", "--allow", "MultiEdit", "--allow", "Write", "--exclude", "Bash", "--exclude", "Fetch"}
	}
}

func buildContinue(a *cliAdapter, req Request) (*invocation, error) {
	if len(req.Prompt) > maxArgBytes {
		return nil, fmt.Errorf("the prompt is %d bytes, longer than a command line takes (128 KiB), and cn -p reads no prompt from stdin", len(req.Prompt))
	}
	args := []string{"-p", "--format", "json"}
	args = append(args, a.cfg.Args...)
	inv := &invocation{env: continueEnv, parser: &continueParser{}}
	if req.MCP != nil && !slices.Contains(a.cfg.Args, "--config") {
		env := mergeEnv(baseEnv(req), sortedEnv(a.cfg.Env), req.Env)
		global := envValue(env, "CONTINUE_GLOBAL_DIR")
		if global == "" {
			global = filepath.Join(envValue(env, "HOME"), ".continue")
		}
		dir, err := os.MkdirTemp("", "nerve-continue-")
		if err != nil {
			return nil, err
		}
		inv.cleanup = func() { os.RemoveAll(dir) }
		inv.binds = append(inv.binds, sandbox.Bind{Src: dir, Dst: dir, Write: true})
		cfg := filepath.Join(dir, "config.yaml")
		switch err := continueConfig(req.onHost(filepath.Join(global, "config.yaml")), cfg, req.MCP, a.info.Permissions); {
		case errors.Is(err, fs.ErrNotExist):
			// No local config (a hub one, or none): cn's own, without
			// nerve's server.
		case err != nil:
			inv.cleanup()
			return nil, err
		default:
			args = append(args, "--config", cfg)
		}
	}
	args = append(args, continuePosture(a.info.Permissions)...)
	inv.args = append(args, "--", req.Prompt)
	return inv, nil
}

// continueConfig writes to dst the user's config (src) with nerve's MCP
// server added to its mcpServers.
func continueConfig(src, dst string, s *MCPServer, perm string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read cn's config to add nerve's MCP server: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	srv := mcpStdioJSON(s, perm, map[string]any{"name": MCPName})
	servers, _ := cfg["mcpServers"].([]any)
	cfg["mcpServers"] = append(servers, srv)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, out, 0o600)
}

// continueParser keeps stdout (bounded) and reads the one object cn
// prints at the end.
type continueParser struct {
	out bytes.Buffer
	cut bool
}

func (p *continueParser) line(line []byte, _ bool) {
	if p.out.Len()+len(line) > MaxContentBytes+4096 {
		p.cut = true
		return
	}
	p.out.Write(line)
	p.out.WriteByte('\n')
}

type continueResult struct {
	Status   *string `json:"status"`
	Response *string `json:"response"`
	Message  string  `json:"message"`
}

func (p *continueParser) finish(o outcome) (string, bool, string) {
	out := strings.TrimSpace(p.out.String())
	if out == "" {
		// An error object goes to stderr.
		for i := len(o.lastErrs) - 1; i >= 0; i-- {
			var r continueResult
			if jsonLine([]byte(o.lastErrs[i]), &r) && r.Status != nil && *r.Status == "error" {
				return "", false, firstLine(r.Message, 500)
			}
		}
		return "", false, "no result object; no output"
	}
	start := strings.IndexAny(out, "{[")
	var r continueResult
	if start >= 0 && json.Unmarshal([]byte(out[start:]), &r) == nil && r.Status != nil {
		switch {
		case *r.Status == "success" && r.Response != nil:
			var t textBuf
			t.WriteString(*r.Response)
			return t.String(), t.truncated, ""
		case *r.Status == "error":
			return "", false, firstLine(r.Message, 500)
		}
	}
	if start >= 0 && json.Valid([]byte(out[start:])) {
		// The answer was JSON itself, printed unwrapped.
		var t textBuf
		t.WriteString(out[start:])
		return t.String(), t.truncated || p.cut, ""
	}
	return "", false, noResult("result object", o.lastOut)
}

func (p *continueParser) usage() usage.Usage { return usage.Usage{} }
