package config

import (
	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// Config is the whole of nerve.yaml after defaults, file, environment and
// flags have been merged. Every section of the schema is parsed, even those
// whose features live in later packages, so a bad file is caught on load.
type Config struct {
	Agent     Agent              `yaml:"agent" json:"agent"`
	Remotes   map[string]Remote  `yaml:"remotes" json:"remotes,omitempty"`
	Workflows []string           `yaml:"workflows" json:"workflows"`
	Adapters  map[string]Adapter `yaml:"adapters" json:"adapters,omitempty"`
	Senses    []Sense            `yaml:"senses" json:"senses,omitempty"`
	Reflexes  []Reflex           `yaml:"reflexes" json:"reflexes,omitempty"`
	Extract   *Endpoint          `yaml:"extract" json:"extract,omitempty"`
	Knowledge *Endpoint          `yaml:"knowledge" json:"knowledge,omitempty"`
	Log       Log                `yaml:"log" json:"log"`
	Daemon    Daemon             `yaml:"daemon" json:"daemon"`
	Workspace Workspace          `yaml:"workspace" json:"workspace"`
	Sandbox   Sandbox            `yaml:"sandbox" json:"sandbox"`
	// Pricing is USD per million tokens by model: it fills a message's
	// cost when the CLI reports tokens only.
	Pricing map[string]usage.Price `yaml:"pricing" json:"pricing,omitempty"`

	// File is the nerve.yaml this was read from; empty when none exists.
	File string `yaml:"-" json:"file,omitempty"`
	// Home is NERVE_HOME.
	Home string `yaml:"-" json:"home"`
}

// Agent describes this machine's agent as others see it.
type Agent struct {
	Name               string `yaml:"name" json:"name"`
	MaxConcurrentTurns int    `yaml:"max_concurrent_turns" json:"max_concurrent_turns"`
}

// Remote is a Khala server reached git-style by name. Its token is never
// here: it lives in nerve.db or a 0600 file.
type Remote struct {
	URL string `yaml:"url" json:"url"`
	// Repos are the git repositories (URL globs, path.Match: "*" stops at
	// "/") this machine fetches for the remote's cloud threads. Empty: the
	// repositories the remote's workflows declare, and no other.
	Repos []string `yaml:"repos" json:"repos,omitempty"`
}

// Adapter is a named adapter instance: an override of a built-in adapter
// (the map key is a type) or a new instance with an explicit type. Its
// schema belongs to the adapter package, which keeps the one table of
// built-in types; the alias lets callers hand it to adapter.New as is.
type Adapter = adapter.Spec

// Sense turns the outside world into signals.
type Sense struct {
	Name      string            `yaml:"name" json:"name"`
	Kind      string            `yaml:"kind" json:"kind"`
	Remote    string            `yaml:"remote" json:"remote,omitempty"`
	Workflows []string          `yaml:"workflows" json:"workflows,omitempty"`
	Roles     []string          `yaml:"roles" json:"roles,omitempty"`
	Every     yamlfile.Duration `yaml:"every" json:"every,omitempty"`
	Paths     []string          `yaml:"paths" json:"paths,omitempty"`
}

// Reflex is a rule from a sense's signals to an action.
type Reflex struct {
	On       string         `yaml:"on" json:"on"`
	Do       string         `yaml:"do" json:"do"`
	Adapter  string         `yaml:"adapter" json:"adapter,omitempty"`
	Workflow string         `yaml:"workflow" json:"workflow,omitempty"`
	Input    map[string]any `yaml:"input" json:"input,omitempty"`
}

// Endpoint is an OpenAI-compatible HTTP service (extract repairs, knowledge
// embeddings). The key is read from the named environment variable, never
// stored in nerve.yaml.
type Endpoint struct {
	BaseURL   string            `yaml:"base_url" json:"base_url"`
	Model     string            `yaml:"model" json:"model"`
	APIKeyEnv string            `yaml:"api_key_env" json:"api_key_env,omitempty"`
	Timeout   yamlfile.Duration `yaml:"timeout" json:"timeout,omitempty"`
}

// Log configures the daemon's structured logger.
type Log struct {
	Level  string `yaml:"level" json:"level"`
	Format string `yaml:"format" json:"format"`
}

// Daemon holds the daemon's own tunables.
type Daemon struct {
	// ShutdownGrace is how long running turns may finish after SIGTERM
	// before their process groups are killed.
	ShutdownGrace yamlfile.Duration `yaml:"shutdown_grace" json:"shutdown_grace"`
	// StallAfter is how long a running adapter may stay silent before a
	// stall detection is raised.
	StallAfter yamlfile.Duration `yaml:"stall_after" json:"stall_after"`
	// MaxSpawnDepth bounds how deep child threads nest (0: the default, 3).
	MaxSpawnDepth int `yaml:"max_spawn_depth" json:"max_spawn_depth"`
	// MetricsAddr, when set, is a loopback host:port where the daemon
	// serves Prometheus /metrics (spend, caps, pauses, turns); off by
	// default.
	MetricsAddr string `yaml:"metrics_addr" json:"metrics_addr,omitempty"`
	// Sandbox is where turns run: auto (bwrap where it works here, else
	// none), bwrap or none; an adapter's own sandbox: overrides it.
	Sandbox string `yaml:"sandbox" json:"sandbox"`
}

// Workspace bounds the git commands nerve runs for thread workspaces: one
// past its deadline is killed with its processes and fails the turn (error
// kind workspace), so a repository that never answers frees the slot.
type Workspace struct {
	// FetchTimeout bounds a clone or fetch of a thread's repository.
	FetchTimeout yamlfile.Duration `yaml:"fetch_timeout" json:"fetch_timeout"`
	// PushTimeout bounds a push of a thread's branch.
	PushTimeout yamlfile.Duration `yaml:"push_timeout" json:"push_timeout"`
	// LocalTimeout bounds every other git command (worktrees, commits,
	// merges, diffs).
	LocalTimeout yamlfile.Duration `yaml:"local_timeout" json:"local_timeout"`
}

// RemoteURL returns the URL of the named remote.
func (c *Config) RemoteURL(name string) (string, bool) {
	r, ok := c.Remotes[name]
	return r.URL, ok
}

// NerveHome returns NERVE_HOME, where the remotes' tokens are kept.
func (c *Config) NerveHome() string { return c.Home }
