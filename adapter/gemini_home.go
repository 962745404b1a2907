package adapter

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// geminiTurnHome makes dir/home/.gemini from userHome's and returns
// dir/home. onHost maps a path as the CLI sees it to where nerve reads
// it (in a sandbox, ~/.gemini is the per-adapter state directory).
func geminiTurnHome(dir, userHome string, s *MCPServer, perm string, onHost func(string) string) (string, error) {
	home := filepath.Join(dir, "home")
	gdir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(gdir, 0o700); err != nil {
		return "", fmt.Errorf("create gemini turn home: %w", err)
	}
	settings := map[string]any{}
	var src string
	if userHome != "" {
		src = filepath.Join(userHome, ".gemini")
		b, err := os.ReadFile(onHost(filepath.Join(src, "settings.json")))
		if err == nil {
			if err := json.Unmarshal(stripJSONComments(b), &settings); err != nil {
				return "", fmt.Errorf("read gemini settings %s: %w", filepath.Join(src, "settings.json"), err)
			}
		}
		entries, _ := os.ReadDir(onHost(src))
		for _, e := range entries {
			if e.Name() == "settings.json" {
				continue
			}
			if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(gdir, e.Name())); err != nil {
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
