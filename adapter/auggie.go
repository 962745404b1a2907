package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/nerve-agents/nerve/internal/sandbox"
)

// Augment's Auggie (checked against 0.36.0, see testdata/FLAGS.md):
//
//	auggie --print --output-format json --instruction=PROMPT [-m M] [args…] [--mcp-config JSON] POSTURE
//
// The prompt goes in --instruction (joined, so one starting with "-"
// stays a value), or --instruction-file when long: a positional prompt
// after some options is taken for their value. Auggie talks to Augment's
// own service only (a login, or AUGMENT_SESSION_AUTH): it cannot be
// pointed at another model endpoint, so only its parser is tested, on the
// result object its source prints, which is Claude Code's result
// (type result, result, is_error, subtype, session_id).
//
// Postures: full leaves Auggie's own defaults (--print approves its
// tools); workspace denies its shell (launch-process) and web tools;
// read-only is --ask (retrieval and non-editing tools only).

var auggieEnv = []string{"AUGMENT_DISABLE_AUTO_UPDATE=1"}

// auggieDenied are Auggie's tools the workspace posture denies.
var auggieDenied = []string{"launch-process", "web-fetch", "web-search"}

func auggiePosture(perm string) []string {
	switch perm {
	case PermFull:
		return nil
	case PermReadOnly:
		return []string{"--ask"}
	}
	var args []string
	for _, t := range auggieDenied {
		args = append(args, "--permission", t+":deny")
	}
	return args
}

func auggieMCP(s *MCPServer, perm string) []string {
	if s == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{MCPName: mcpStdioJSON(s, perm, nil)}})
	return []string{"--mcp-config", string(b)}
}

func buildAuggie(a *cliAdapter, req Request) (*invocation, error) {
	args := []string{"--print", "--output-format", "json"}
	inv := &invocation{env: auggieEnv, parser: &claudeParser{}}
	if len(req.Prompt) > maxArgBytes {
		dir, err := os.MkdirTemp("", "nerve-auggie-")
		if err != nil {
			return nil, err
		}
		inv.cleanup = func() { os.RemoveAll(dir) }
		inv.binds = append(inv.binds, sandbox.Bind{Src: dir, Dst: dir, Write: true})
		f := filepath.Join(dir, "prompt.txt")
		if err := os.WriteFile(f, []byte(req.Prompt), 0o600); err != nil {
			inv.cleanup()
			return nil, err
		}
		args = append(args, "--instruction-file", f)
	} else {
		args = append(args, "--instruction="+req.Prompt)
	}
	if a.cfg.Model != "" {
		args = append(args, "-m", a.cfg.Model)
	}
	args = append(args, a.cfg.Args...)
	args = append(args, auggieMCP(req.MCP, a.info.Permissions)...)
	inv.args = append(args, auggiePosture(a.info.Permissions)...)
	return inv, nil
}
