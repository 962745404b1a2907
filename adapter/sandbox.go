package adapter

import (
	"os"
	"os/exec"
	"slices"
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
