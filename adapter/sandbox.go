package adapter

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/internal/sandbox"
)

// statePaths are where each type's CLI keeps its own state (logins,
// settings, sessions), relative to HOME: inside a sandbox these are the
// only parts of HOME it sees, read-write. A name in stateFiles is a
// file; the others are directories.
var statePaths = map[string][]string{
	"claude":   {".claude", ".claude.json"},
	"codex":    {".codex"},
	"gemini":   {".gemini"},
	"qwen":     {".qwen"},
	"opencode": {".local/share/opencode", ".config/opencode", ".local/state/opencode", ".cache/opencode"},
	"cursor":   {".cursor", ".config/cursor"},
	"hermes":   {".hermes"},
	"copilot":  {".copilot", ".cache/copilot"},
	"pi":       {".pi"},
	"kilo":     {".config/kilo", ".local/share/kilo", ".local/state/kilo", ".local/state/kilo-sandbox-policy", ".cache/kilo"},
	"droid":    {".factory"},
	"continue": {".continue"},
	"auggie":   {".augment"},
	"crush":    {".local/share/crush", ".config/crush"},
}

var stateFiles = map[string]bool{".claude.json": true}

// StatePath is one place a CLI keeps its state, relative to HOME.
type StatePath struct {
	Rel  string
	File bool
}

// StatePaths returns where type typ's CLI keeps its state (none for exec).
func StatePaths(typ string) []StatePath {
	var out []StatePath
	for _, p := range statePaths[typ] {
		out = append(out, StatePath{Rel: p, File: stateFiles[p]})
	}
	return out
}

// command is the turn's process: the CLI itself, or bwrap running it in
// the request's sandbox with env as its whole environment.
func (a *cliAdapter) command(req Request, inv *invocation, path string, env []string) *exec.Cmd {
	if req.Sandbox == nil {
		cmd := exec.Command(path, inv.args...)
		cmd.Args[0] = a.info.Binary
		cmd.Env = env
		return cmd
	}
	s := *req.Sandbox
	s.Env = env
	s.State = append(slices.Clip(s.State), inv.binds...)
	s.Read = slices.Clip(s.Read)
	a.ownerPaths(&s)
	bwrap, argv, benv := s.Command(path, inv.args)
	cmd := exec.Command(bwrap, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = benv
	return cmd
}

// baseEnv is what a turn's environment starts from: the daemon's own, or
// in a sandbox the allow-list the executor built.
func baseEnv(req Request) []string {
	if req.Sandbox != nil {
		return req.Sandbox.Env
	}
	return os.Environ()
}

// onHost maps a path as the CLI sees it to the host path it is bound
// from: a state path in a sandbox, else p itself.
func (req Request) onHost(p string) string {
	if req.Sandbox == nil {
		return p
	}
	for _, b := range req.Sandbox.State {
		if rel, err := filepath.Rel(b.Dst, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.Join(b.Src, rel)
		}
	}
	return p
}

// ownerPaths binds what the owner pointed the adapter at in its env: a
// HOME, *_HOME or *_DIR directory read-write (the CLI keeps its state
// there: CODEX_HOME, CLAUDE_CONFIG_DIR), any other existing absolute path
// read-only (a config file such as OPENCODE_CONFIG). Never one that would
// show the owner's HOME or NERVE_HOME.
func (a *cliAdapter) ownerPaths(s *sandbox.Spec) {
	for _, k := range slices.Sorted(maps.Keys(a.cfg.Env)) {
		v := filepath.Clean(a.cfg.Env[k])
		if !filepath.IsAbs(a.cfg.Env[k]) || s.Covers(v) {
			continue
		}
		st, err := os.Stat(v)
		switch {
		case err != nil:
		case st.IsDir() && (k == "HOME" || strings.HasSuffix(k, "_HOME") || strings.HasSuffix(k, "_DIR")):
			s.State = append(s.State, sandbox.Bind{Src: v, Dst: v, Write: true})
		default:
			s.Read = append(s.Read, v)
		}
	}
}
