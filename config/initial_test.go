package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nerve-agents/nerve/config"
)

// The first nerve.yaml keeps the name as written, even one YAML would
// read as another type, and refuses one that is no agent name.
func TestWriteInitialName(t *testing.T) {
	for _, name := range []string{"laptop-1", "null", "true", "123", "1e3", "0x1F", "Host.local"} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			path := filepath.Join(home, "nerve.yaml")
			if wrote, err := config.WriteInitial(path, name); err != nil || !wrote {
				t.Fatalf("wrote %v, %v", wrote, err)
			}
			cfg, err := config.Load(config.LoadOptions{File: path, Getenv: onlyHome(home)})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Agent.Name != name {
				t.Fatalf("agent.name %q, want %q", cfg.Agent.Name, name)
			}
		})
	}
	for _, name := range []string{"", `bad name: "x"`, "a\nb", "-flag"} {
		path := filepath.Join(t.TempDir(), "nerve.yaml")
		if _, err := config.WriteInitial(path, name); err == nil {
			t.Errorf("WriteInitial(%q) accepted it", name)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("WriteInitial(%q) wrote %s", name, path)
		}
	}
}
