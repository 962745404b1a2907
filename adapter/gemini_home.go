package adapter

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nerve-agents/nerve/internal/sandbox"
)

// Gemini reads mcpServers from settings files only: the system file (which
// it skips unless it and every directory above it are owned by root and
// not world-writable), the user's ~/.gemini/settings.json and the
// workspace's .gemini/settings.json. nerve writes none of those. It gives
// Gemini a home of the turn's own instead (GEMINI_CLI_HOME, which replaces
// $HOME for everything Gemini keeps): its .gemini holds the user's
// settings with nerve's server added, and links to everything else of the
// user's ~/.gemini (credentials, history, extensions), so the turn sees
// the user's Gemini as it is, plus nerve.

// geminiUserHome is the home whose .gemini the user's Gemini uses, as the
// CLI would see it: HOME from the adapter's env in nerve.yaml, else the
// daemon's GEMINI_CLI_HOME or HOME.
func geminiUserHome(cfgEnv map[string]string) string {
	if v := cfgEnv["HOME"]; v != "" {
		return v
	}
	for _, k := range []string{"GEMINI_CLI_HOME", "HOME"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	h, _ := os.UserHomeDir()
	return h
}

// geminiHomes are the home whose .gemini nerve reads the user's settings
// from and the one the CLI sees it at: the same but in a sandbox, where
// the CLI's .gemini is its state directory (under NERVE_HOME/sandbox, or
// the real one with share_state) bound at the sandbox's HOME.
func geminiHomes(cfgEnv map[string]string, box *sandbox.Spec) (read, seen string) {
	if box != nil && box.Home != "" {
		for _, b := range box.State {
			if b.Dst == filepath.Join(box.Home, ".gemini") {
				return filepath.Dir(b.Src), box.Home
			}
		}
	}
	h := geminiUserHome(cfgEnv)
	return h, h
}

// geminiTurnHome makes dir/home/.gemini from userHome's, linking to its
// entries as they are seen at seenHome, and returns dir/home.
func geminiTurnHome(dir, userHome, seenHome string, s *MCPServer, perm string) (string, error) {
	home := filepath.Join(dir, "home")
	gdir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(gdir, 0o700); err != nil {
		return "", fmt.Errorf("create gemini turn home: %w", err)
	}
	settings := map[string]any{}
	var src string
	if userHome != "" {
		src = filepath.Join(userHome, ".gemini")
		b, err := os.ReadFile(filepath.Join(src, "settings.json"))
		if err == nil {
			if err := json.Unmarshal(stripJSONComments(b), &settings); err != nil {
				return "", fmt.Errorf("read gemini settings %s: %w", filepath.Join(src, "settings.json"), err)
			}
		}
		entries, _ := os.ReadDir(src)
		for _, e := range entries {
			if e.Name() == "settings.json" {
				continue
			}
			if err := os.Symlink(filepath.Join(seenHome, ".gemini", e.Name()), filepath.Join(gdir, e.Name())); err != nil {
				return "", fmt.Errorf("link gemini %s: %w", e.Name(), err)
			}
		}
	}
	servers, _ := settings["mcpServers"].(map[string]any)
	if servers == nil {
		servers = map[string]any{}
	}
	servers[MCPName] = mcpStdioJSON(s, perm, nil)
	settings["mcpServers"] = servers
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return "", fmt.Errorf("write gemini settings: %w", err)
	}
	if err := os.WriteFile(filepath.Join(gdir, "settings.json"), b, 0o600); err != nil {
		return "", fmt.Errorf("write gemini settings: %w", err)
	}
	return home, nil
}

// stripJSONComments removes // and /* */ comments outside strings, as
// Gemini allows in its settings files.
func stripJSONComments(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			out = append(out, c)
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			i += 2
			for i+1 < len(b) && !(b[i] == '*' && b[i+1] == '/') {
				i++
			}
			i++
		default:
			out = append(out, c)
		}
	}
	return out
}
