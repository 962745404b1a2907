package config_test

import (
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// The sandbox's settings: defaults, NERVE_DAEMON_SANDBOX over the file,
// an adapter's own mode over daemon.sandbox.
func TestSandboxSettings(t *testing.T) {
	cfg, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SandboxMode("claude") != "auto" || cfg.SandboxNetwork() != "allow-list" {
		t.Fatalf("defaults: mode %q network %q", cfg.SandboxMode("claude"), cfg.SandboxNetwork())
	}
	cfg, err = load(t, `daemon: {sandbox: bwrap}
adapters:
  claude: {sandbox: none}
sandbox:
  read: [~/.gitconfig, /etc/ssl]
  env: [LANG, GH_TOKEN]
  share_state: true
  network: open
  hosts: [api.github.com, "*.example.com:443"]
  secrets:
    - {env: ANTHROPIC_API_KEY, host: api.anthropic.com, header: x-api-key}
`, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SandboxMode("claude") != "none" || cfg.SandboxMode("codex") != "bwrap" || cfg.SandboxNetwork() != "open" ||
		!cfg.Sandbox.ShareState || len(cfg.Sandbox.Secrets) != 1 || cfg.Sandbox.Secrets[0].Header != "x-api-key" {
		t.Fatalf("parsed wrong: %+v", cfg.Sandbox)
	}
	cfg, err = load(t, "daemon: {sandbox: bwrap}\n", map[string]string{"NERVE_DAEMON_SANDBOX": "none"})
	if err != nil || cfg.SandboxMode("claude") != "none" {
		t.Fatalf("NERVE_DAEMON_SANDBOX=none over the file: %v %v", err, cfg)
	}
}

// Each bad sandbox setting is one error naming its line and what is
// allowed.
func TestSandboxBadSettings(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"daemon:\n  sandbox: maybe\n", `nerve.yaml:2: daemon.sandbox: unknown sandbox mode "maybe" (want one of auto, bwrap, none)`},
		{"adapters:\n  claude:\n    sandbox: yes\n", `nerve.yaml:3: adapters.claude.sandbox: unknown sandbox mode "yes" (want one of auto, bwrap, none)`},
		{"sandbox:\n  network: closed\n", `nerve.yaml:2: sandbox.network: unknown network "closed" (want one of open, allow-list, none)`},
		{"sandbox:\n  read: [relative/path]\n", `sandbox.read[0]: "relative/path" is not an absolute path or ~/path`},
		{"sandbox:\n  env: [\"A=B\"]\n", `sandbox.env[0]: "A=B" is not an environment variable name`},
		{"sandbox:\n  hosts: [\"http://x.com/\"]\n", `sandbox.hosts[0]: "http://x.com/"`},
		{"sandbox:\n  hosts: [\"x.com:http\"]\n", `sandbox.hosts[0]: "x.com:http": bad port "http"`},
		{"sandbox:\n  secrets:\n    - {env: \"\"}\n", `sandbox.secrets[0].env: "" is not an environment variable name`},
		{"sandbox:\n  secrets:\n    - {env: K, header: x-api-key}\n", `sandbox.secrets[0].header: a header needs a host`},
		{"sandbox:\n  netwrk: open\n", `netwrk`},
	} {
		_, err := load(t, c.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
			continue
		}
		if _, ok := err.(yamlfile.Errors); !ok {
			if _, ok := err.(*yamlfile.Error); !ok {
				t.Errorf("%q: %T is not a config error", c.yaml, err)
			}
		}
	}
}
