package adapter

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Droid's turn home links the user's .factory, all but mcp.json, which
// holds nerve's server alone; the state directories are made in the
// user's, so what droid writes there outlives the turn.
func TestDroidHome(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), ".factory"), filepath.Join(t.TempDir(), ".factory")
	os.MkdirAll(src, 0o700)
	os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"custom_models":[]}`), 0o600)
	os.WriteFile(filepath.Join(src, "mcp.json"), []byte(`{"mcpServers":{"theirs":{"command":"x"}}}`), 0o600)
	s := &MCPServer{Command: "/bin/nerve", Args: []string{"mcp"}, Env: []string{"NERVE_THREAD=t#thread-1"}}
	if err := droidHome(src, src, dst, s, PermReadOnly); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "config.json")); err != nil || l != filepath.Join(src, "config.json") {
		t.Errorf("config.json not linked: %q %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "sessions")); err != nil || l != filepath.Join(src, "sessions") {
		t.Errorf("sessions not linked to the user's: %q %v", l, err)
	}
	b, _ := os.ReadFile(filepath.Join(dst, "mcp.json"))
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || len(cfg.MCPServers) != 1 {
		t.Fatalf("mcp.json %s: %v", b, err)
	}
	if n := cfg.MCPServers[MCPName]; n.Command != "/bin/nerve" || strings.Join(n.Args, " ") != "mcp --read-only" || n.Env["NERVE_THREAD"] != "t#thread-1" {
		t.Fatalf("nerve's entry: %+v", n)
	}
}

// cn's turn config is the user's with nerve's server added to theirs.
func TestContinueConfig(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "turn.yaml")
	os.WriteFile(src, []byte("name: mine\nmodels:\n  - {name: m, provider: openai, model: x}\nmcpServers:\n  - {name: theirs, command: x}\n"), 0o600)
	if err := continueConfig(src, dst, &MCPServer{Command: "/bin/nerve", Args: []string{"mcp"}}, PermWorkspace); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(dst)
	var cfg struct {
		Name       string           `yaml:"name"`
		Models     []map[string]any `yaml:"models"`
		MCPServers []struct {
			Name, Command string
			Args          []string
		} `yaml:"mcpServers"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || cfg.Name != "mine" || len(cfg.Models) != 1 || len(cfg.MCPServers) != 2 {
		t.Fatalf("turn config %s: %v", b, err)
	}
	if n := cfg.MCPServers[1]; n.Name != MCPName || n.Command != "/bin/nerve" || strings.Join(n.Args, " ") != "mcp" {
		t.Fatalf("nerve's entry: %+v", n)
	}
	if err := continueConfig(filepath.Join(dir, "none.yaml"), dst, &MCPServer{Command: "n"}, PermWorkspace); err == nil ||
		!strings.Contains(err.Error(), "read cn's config to add nerve's MCP server") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing config: %v", err)
	}
}
