package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nerve "github.com/nerve-agents/nerve"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

func load(t *testing.T, yaml string, env map[string]string) (*config.Config, error) {
	t.Helper()
	home := t.TempDir()
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(home, "nerve.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(k string) string {
		if k == "NERVE_HOME" {
			return home
		}
		return env[k]
	}
	return config.Load(config.LoadOptions{Getenv: getenv})
}

func TestDefaultsWithoutFile(t *testing.T) {
	cfg, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.MaxConcurrentTurns != 2 || cfg.Log.Level != "info" || cfg.File != "" {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
	if len(cfg.Workflows) != 1 || !strings.HasSuffix(cfg.Workflows[0], "workflows") {
		t.Fatalf("workflows dir = %v", cfg.Workflows)
	}
	if !cfg.HasAdapter("example") || !cfg.HasAdapter("claude") || cfg.HasAdapter("nope") {
		t.Fatal("adapter lookup wrong")
	}
}

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := load(t, string(nerve.ExampleConfig), nil)
	if err != nil {
		t.Fatalf("nerve.yaml.example does not load: %v", err)
	}
	if cfg.Agent.Name != "laptop-1" || cfg.Adapters["claude-fast"].Timeout.D() != 2*time.Minute {
		t.Fatalf("example parsed wrong: %+v", cfg.Agent)
	}
	if cfg.Extract == nil || cfg.Extract.Model != "qwen-plus" || len(cfg.Reflexes) != 2 {
		t.Fatal("example sections missing")
	}
	if !cfg.HasAdapter("example") {
		t.Fatal("a file's adapters must add to the built-in ones, not replace them")
	}
	if w := cfg.Workspace; w.FetchTimeout.D() != 2*time.Minute || w.PushTimeout.D() != time.Minute || w.LocalTimeout.D() != 10*time.Minute {
		t.Fatalf("example's workspace deadlines: %+v", w)
	}
}

func TestEnvOverridesFile(t *testing.T) {
	cfg, err := load(t, "agent: {name: from-file}\nlog: {level: warn}\n", map[string]string{
		"NERVE_AGENT_NAME": "from-env", "NERVE_AGENT_MAX_CONCURRENT_TURNS": "5",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Name != "from-env" || cfg.Agent.MaxConcurrentTurns != 5 || cfg.Log.Level != "warn" {
		t.Fatalf("layering wrong: %+v %+v", cfg.Agent, cfg.Log)
	}
}

// Each bad file must name the file, the line and the field.
func TestBadFiles(t *testing.T) {
	cases := []struct {
		name, yaml, want string
		line             int
	}{
		{"syntax", "agent:\n\tname: a\n", "invalid YAML", 2},
		{"unknown top key", "agent: {name: a}\nremotez: {}\n", `unknown key "remotez" (did you mean "remotes"?)`, 2},
		{"unknown nested key", "adapters:\n  claude:\n    timout: 5m\n", `adapters.claude.timout: unknown key "timout" (did you mean "timeout"?)`, 3},
		{"wrong type", "agent:\n  max_concurrent_turns: lots\n", `agent.max_concurrent_turns: want a whole number, got "lots"`, 2},
		{"number out of range", "agent:\n  max_concurrent_turns: 99999999999999999999\n", "agent.max_concurrent_turns: want a whole number, got 99999999999999999999 (out of range)", 2},
		{"list for a mapping", "remotes: [origin]\n", "remotes: want a mapping, got a list", 1},
		{"not a mapping at all", "laptop-1\n", `nerve.yaml:1: want a mapping, got "laptop-1"`, 1},
		{"agent name Khala refuses", "agent:\n  name: my laptop\n", "agent.name: must be 1-64 letters, digits", 2},
		{"bad duration", "adapters:\n  claude:\n    timeout: forever\n", `"forever" is not a duration`, 3},
		{"zero capacity", "agent:\n  max_concurrent_turns: 0\n", "agent.max_concurrent_turns: must be at least 1", 2},
		{"unknown adapter type", "adapters:\n  x:\n    type: clod\n", `adapters.x.type: unknown type "clod"`, 3},
		{"custom adapter without type", "adapters:\n  mybot:\n    command: [x]\n", "adapters.mybot.type: no type", 2},
		{"exec without command", "adapters:\n  bot:\n    type: exec\n", "adapters.bot.command: type exec needs a command", 2},
		{"bad permissions", "adapters:\n  claude:\n    permissions: root\n", `adapters.claude.permissions: unknown permissions "root"`, 3},
		{"bad remote url", "remotes:\n  origin:\n    url: ftp://x\n", `is not an http(s) URL`, 3},
		{"bad repos glob", "remotes:\n  origin:\n    url: http://k\n    repos: [\"https://git.example.com/[team\"]\n", `remotes.origin.repos[0]: "https://git.example.com/[team" is not a glob`, 4},
		{"sense unknown kind", "senses:\n  - name: s\n    kind: telepathy\n", `unknown kind "telepathy"`, 3},
		{"khala sense unknown remote", "senses:\n  - name: s\n    kind: khala\n    remote: origin\n", `unknown remote "origin"`, 4},
		{"reflex unknown sense", "reflexes:\n  - on: nothing\n    do: turn\n    adapter: claude\n", `unknown sense "nothing"`, 2},
		{"reflex unknown adapter", "remotes: {o: {url: 'http://x'}}\nsenses:\n  - {name: t, kind: khala, remote: o}\nreflexes:\n  - on: t\n    do: turn\n    adapter: nope\n", `unknown adapter "nope"`, 7},
		{"turn reflex on an interval sense", "senses:\n  - {name: t, kind: interval, every: 1m}\nreflexes:\n  - on: t\n    do: turn\n    adapter: claude\n", `do: turn runs turns claimed by a khala sense; "t" is an interval sense`, 5},
		{"bad log level", "log:\n  level: loud\n", `unknown level "loud"`, 2},
		{"negative price", "pricing:\n  gpt-test:\n    input: -1\n", "pricing.gpt-test.input: must be a non-negative USD amount", 3},
		{"price not a number", "pricing:\n  gpt-test:\n    output: cheap\n", "pricing.gpt-test.output", 3},
		{"unknown price key", "pricing:\n  gpt-test:\n    inptu: 1\n", `unknown key "inptu" (did you mean "input"?)`, 3},
		{"pricing not a map", "pricing: [1, 2]\n", "pricing", 1},
		{"negative daily_usd", "adapters:\n  claude:\n    daily_usd: -1\n", "adapters.claude.daily_usd: must be a number of dollars, 0 or more, got -1", 3},
		{"daily_usd not a number", "adapters:\n  claude:\n    daily_usd: lots\n", "adapters.claude.daily_usd", 3},
		{"negative daily_tokens", "adapters:\n  fast:\n    type: claude\n    daily_tokens: -5\n", "adapters.fast.daily_tokens: must not be negative, got -5", 4},
		{"metrics on every interface", "daemon:\n  metrics_addr: 0.0.0.0:9464\n", `daemon.metrics_addr: "0.0.0.0:9464" is not a loopback address`, 2},
		{"metrics on a host name", "daemon:\n  metrics_addr: example.com:9464\n", "is not a loopback address", 2},
		{"metrics without a port", "daemon:\n  metrics_addr: 127.0.0.1\n", "is not host:port", 2},
		{"max_concurrent_turns with a fraction", "agent:\n  max_concurrent_turns: 1.5\n", "agent.max_concurrent_turns: want a whole number, got 1.5", 2},
		{"zero fetch deadline", "workspace:\n  fetch_timeout: 0s\n", "workspace.fetch_timeout: must be a positive duration such as 2m, got 0s", 2},
		{"negative push deadline", "workspace:\n  push_timeout: -1m\n", "workspace.push_timeout: \"-1m\": a duration cannot be negative", 2},
		{"unknown workspace key", "workspace:\n  git_timeout: 1m\n", `unknown key "git_timeout"`, 2},
		{"extract without model", "extract:\n  base_url: http://127.0.0.1:1/v1\n", "extract.model: is required", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml, nil)
			if err == nil {
				t.Fatal("loaded a bad file")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "nerve.yaml:") {
				t.Fatalf("error %q does not name the file", err)
			}
			if strings.Contains(err.Error(), "unmarshal") || strings.Contains(err.Error(), "!!") {
				t.Fatalf("error %q shows the YAML library's internals", err)
			}
			var fe *yamlfile.Error
			var fes yamlfile.Errors
			line := 0
			if errors.As(err, &fes) {
				line = fes[0].Line
			} else if errors.As(err, &fe) {
				line = fe.Line
			}
			if line != tc.line {
				t.Fatalf("error %q: line %d, want %d", err, line, tc.line)
			}
			var ec interface{ ExitCode() int }
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Fatal("a config error must exit 2")
			}
		})
	}
}

func TestPricingLoads(t *testing.T) {
	cfg, err := load(t, "pricing:\n  gpt-test: {input: 2.5, output: 10, cache_read: 0.25}\n  Claude 4 Sonnet: {input: 3}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pricing["gpt-test"]; p.Input != 2.5 || p.Output != 10 || p.CacheRead != 0.25 {
		t.Fatalf("pricing %+v", cfg.Pricing)
	}
	if p := cfg.Pricing["Claude 4 Sonnet"]; p.Input != 3 {
		t.Fatalf("a model name keeps its case: %+v", cfg.Pricing)
	}
}

func TestCapsAndMetricsLoad(t *testing.T) {
	cfg, err := load(t, "daemon: {metrics_addr: '[::1]:0'}\nadapters:\n  claude: {daily_usd: 2.5, daily_tokens: 0}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cfg.AdapterConfig("claude")
	if a.DailyUSD == nil || *a.DailyUSD != 2.5 || a.DailyTokens == nil || *a.DailyTokens != 0 || cfg.Daemon.MetricsAddr != "[::1]:0" {
		t.Fatalf("caps %+v, metrics %q", a, cfg.Daemon.MetricsAddr)
	}
}

func TestAllProblemsInOneRun(t *testing.T) {
	_, err := load(t, "agent:\n  max_concurrent_turns: 0\nlog:\n  level: loud\n", nil)
	var fes yamlfile.Errors
	if !errors.As(err, &fes) || len(fes) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
}

func TestExplicitMissingFile(t *testing.T) {
	_, err := config.Load(config.LoadOptions{File: filepath.Join(t.TempDir(), "nope.yaml"), Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("want a missing-file error, got %v", err)
	}
}

func TestWatchSeesRenameIntoPlace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nerve.yaml")
	os.WriteFile(file, []byte("agent: {name: a}\n"), 0o600)
	changed := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := config.NewWatcher(file)
	go w.Run(ctx, func() { changed <- struct{}{} })
	tmp := filepath.Join(dir, ".nerve.yaml.tmp")
	os.WriteFile(tmp, []byte("agent: {name: b}\n"), 0o600)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change seen after an editor-style rename")
	}
}
