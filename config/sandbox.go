package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/internal/sandbox"
)

// Sandbox is nerve.yaml's sandbox: section, what every turn's sandbox
// holds besides its workdir (DESIGN.md, Sandbox and authorization).
// Whether turns run in one is daemon.sandbox and adapters.NAME.sandbox.
type Sandbox struct {
	// Read are host paths bound read-only at their own path (~ expands),
	// e.g. ~/.gitconfig. A path that does not exist is skipped.
	Read []string `yaml:"read" json:"read,omitempty"`
	// Env names variables passed from the daemon's environment, besides
	// the built-in HOME, USER, LOGNAME, LANG, LC_ALL, TERM, TZ and PATH.
	Env []string `yaml:"env" json:"env,omitempty"`
	// ShareState binds the CLI's real state (~/.claude, ~/.codex ...)
	// instead of a directory of its own under NERVE_HOME/sandbox.
	ShareState bool `yaml:"share_state" json:"share_state,omitempty"`
	// Network is open, allow-list (the default) or none.
	Network string `yaml:"network" json:"network"`
	// Hosts are admitted besides each adapter's model endpoint: host,
	// host:port, or *.suffix.
	Hosts []string `yaml:"hosts" json:"hosts,omitempty"`
	// Secrets are values nerve masks in what it stores and logs, and may
	// add to requests for a host.
	Secrets []Secret `yaml:"secrets" json:"secrets,omitempty"`
}

// Secret is a credential a turn may use without holding it.
type Secret struct {
	// Env is the daemon's variable holding the value.
	Env string `yaml:"env" json:"env"`
	// Host, when set, has the proxy add the value to requests for it ...
	Host string `yaml:"host" json:"host,omitempty"`
	// ... as this header ("" means Authorization: Bearer VALUE).
	Header string `yaml:"header" json:"header,omitempty"`
}

// SandboxMode is the mode adapter name's turns run in as nerve.yaml says
// it (auto, bwrap or none): the adapter's own sandbox:, else
// daemon.sandbox, else auto. Whether auto means bwrap here is
// sandbox.Available's answer.
func (c *Config) SandboxMode(name string) string {
	if a, ok := c.AdapterConfig(name); ok && a.Sandbox != "" {
		return a.Sandbox
	}
	if c.Daemon.Sandbox != "" {
		return c.Daemon.Sandbox
	}
	return sandbox.ModeAuto
}

// SandboxNetwork is sandbox.network with its default.
func (c *Config) SandboxNetwork() string {
	if c.Sandbox.Network == "" {
		return sandbox.NetAllowList
	}
	return c.Sandbox.Network
}

// sandbox validates daemon.sandbox and the sandbox: section.
func (v *validator) sandbox(cfg *Config) {
	if m := cfg.Daemon.Sandbox; m != "" && !slices.Contains(sandbox.Modes, m) {
		v.add("daemon.sandbox", "unknown sandbox mode %q (want one of %s)", m, strings.Join(sandbox.Modes, ", "))
	}
	s := cfg.Sandbox
	if s.Network != "" && !slices.Contains(sandbox.Networks, s.Network) {
		v.add("sandbox.network", "unknown network %q (want one of %s)", s.Network, strings.Join(sandbox.Networks, ", "))
	}
	for i, p := range s.Read {
		if p == "" || !(strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~/") || p == "~") {
			v.add(fmt.Sprintf("sandbox.read[%d]", i), "%q is not an absolute path or ~/path", p)
		}
	}
	for i, name := range s.Env {
		if !envNameOK(name) {
			v.add(fmt.Sprintf("sandbox.env[%d]", i), "%q is not an environment variable name", name)
		}
	}
	for i, h := range s.Hosts {
		if err := checkHostPattern(h); err != nil {
			v.add(fmt.Sprintf("sandbox.hosts[%d]", i), "%q: %s", h, err)
		}
	}
	for i, sec := range s.Secrets {
		p := fmt.Sprintf("sandbox.secrets[%d]", i)
		if !envNameOK(sec.Env) {
			v.add(p+".env", "%q is not an environment variable name (the daemon's variable holding the secret)", sec.Env)
		}
		if sec.Host != "" {
			if err := checkHostPattern(sec.Host); err != nil {
				v.add(p+".host", "%q: %s", sec.Host, err)
			}
		}
		if sec.Header != "" && sec.Host == "" {
			v.add(p+".header", "a header needs a host to add it to")
		}
		if strings.ContainsAny(sec.Header, ": \t\r\n") {
			v.add(p+".header", "%q is not a header name", sec.Header)
		}
	}
}

func envNameOK(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// checkHostPattern accepts host, host:port and *.suffix (optionally with
// a port): what the proxy matches a CONNECT target against.
func checkHostPattern(h string) error {
	host := h
	if i := strings.LastIndex(h, ":"); i >= 0 && !strings.Contains(h[i+1:], "]") {
		host = h[:i]
		port := h[i+1:]
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return fmt.Errorf("bad port %q", port)
		}
	}
	host = strings.TrimPrefix(host, "*.")
	if host == "" || strings.ContainsAny(host, "/*@ \t") {
		return fmt.Errorf("want a host, host:port or *.suffix")
	}
	return nil
}
