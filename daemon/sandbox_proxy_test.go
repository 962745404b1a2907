package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/netproxy"
)

func endpointsOf(eps []modelEndpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.url.String()+" "+e.envVar)
	}
	return out
}

func TestModelEndpointsFromTheAdaptersConfig(t *testing.T) {
	state := t.TempDir()
	os.MkdirAll(filepath.Join(state, ".codex"), 0o700)
	os.WriteFile(filepath.Join(state, ".codex", "config.toml"), []byte("[model_providers.local]\nbase_url = \"http://127.0.0.1:4000/v1\"\n"), 0o600)
	for _, c := range []struct {
		ac   config.Adapter
		want []string
	}{
		{config.Adapter{Type: "claude", Env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}},
			[]string{"http://127.0.0.1:9/ ANTHROPIC_BASE_URL", "https://api.anthropic.com "}},
		{config.Adapter{Type: "claude"}, []string{"https://api.anthropic.com ANTHROPIC_BASE_URL"}},
		{config.Adapter{Type: "codex"}, []string{"http://127.0.0.1:4000/v1 ", "https://api.openai.com ", "https://chatgpt.com ", "https://auth.openai.com "}},
		{config.Adapter{Type: "exec"}, nil},
	} {
		got := endpointsOf(modelEndpoints(c.ac, state))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %v: endpoints %q, want %q", c.ac.Type, c.ac.Env, got, c.want)
		}
	}
}

func TestPlanNetwork(t *testing.T) {
	cfg := &config.Config{}
	cfg.Sandbox.Hosts = []string{"api.github.com", "127.0.0.1:3128"}
	ac := config.Adapter{Type: "claude", Env: map[string]string{"ANTHROPIC_BASE_URL": "http://localhost:8080"}}
	pl := planNetwork(cfg, ac, modelEndpoints(ac, ""), nil)
	if !slices.Equal(pl.hosts, []string{"api.github.com", "127.0.0.1:3128", "localhost:8080", "api.anthropic.com"}) {
		t.Errorf("hosts %q", pl.hosts)
	}
	// A listed loopback host:port and the loopback endpoint are forwarded
	// inside; the proxy port moves off a forwarded one.
	if got := strings.Join(pl.flags, " "); got != "--forward 127.0.0.1:3128 --forward localhost:8080" || pl.proxyPort != 3129 || pl.env != nil {
		t.Errorf("flags %q, proxy port %d, env %q", got, pl.proxyPort, pl.env)
	}

	// A secret for the vendor's https endpoint: the CLI is pointed at a
	// plain-http forward inside, whose proxy speaks TLS and adds the key.
	ac = config.Adapter{Type: "claude"}
	pl = planNetwork(&config.Config{}, ac, modelEndpoints(ac, ""), []netproxy.Secret{{Host: "api.anthropic.com", Header: "x-api-key", Value: "k"}})
	if got := strings.Join(pl.flags, " "); got != "--tls-forward 127.0.0.1:3129=api.anthropic.com:443" || pl.proxyPort != 3128 {
		t.Errorf("flags %q, proxy port %d", got, pl.proxyPort)
	}
	if !slices.Equal(pl.env, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:3129"}) {
		t.Errorf("env %q", pl.env)
	}
	pol, err := netproxy.NewPolicy(pl.hosts)
	if err != nil || !pol.Allows("api.anthropic.com:443") || pol.Allows("example.com:443") {
		t.Errorf("policy of %q: %v", pl.hosts, err)
	}
}

func TestRefusedHostsAreBounded(t *testing.T) {
	var r netRecord
	for i := range maxRefusedHosts + 10 {
		r.add(strings.Repeat("h", i+1) + ".example")
	}
	r.add("h.example")
	c := r.counts()
	if len(c) != maxRefusedHosts+1 || c["other"] != 10 || c["h.example"] != 2 {
		t.Errorf("%d series, other %d, h.example %d", len(c), c["other"], c["h.example"])
	}
}
