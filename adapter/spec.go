package adapter

import (
	"fmt"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// Spec is one adapter instance as nerve.yaml's adapters: section writes it:
// an override of a built-in type (the key is the type) or a new instance
// with an explicit type. It is defined here, beside the table of built-in
// types, so that the adapter package needs nothing of the config loader
// and the config's validation asks this package what a valid instance is.
type Spec struct {
	Type        string            `yaml:"type" json:"type"`
	Command     []string          `yaml:"command" json:"command,omitempty"`
	Binary      string            `yaml:"binary" json:"binary,omitempty"`
	Model       string            `yaml:"model" json:"model,omitempty"`
	Timeout     yamlfile.Duration `yaml:"timeout" json:"timeout,omitempty"`
	Permissions string            `yaml:"permissions" json:"permissions,omitempty"`
	Env         map[string]string `yaml:"env" json:"env,omitempty"`
	Args        []string          `yaml:"args" json:"args,omitempty"`
	// Sandbox overrides daemon.sandbox for this instance: auto, bwrap or
	// none (package internal/sandbox's modes).
	Sandbox string `yaml:"sandbox" json:"sandbox,omitempty"`
	// DailyUSD and DailyTokens cap what the instance may spend per UTC
	// day (nil: no cap). The daemon enforces them, not the adapter: past
	// one it starts no turn with the instance until 00:00 UTC.
	DailyUSD    *float64 `yaml:"daily_usd" json:"daily_usd,omitempty"`
	DailyTokens *int64   `yaml:"daily_tokens" json:"daily_tokens,omitempty"`
}

// SpecError is a problem with an adapter instance's Spec. Field is the
// Spec field at fault as nerve.yaml spells it ("type", "command"), so a
// config error can name the line; it is empty for the name itself.
type SpecError struct {
	Name  string
	Field string
	Msg   string
}

func (e *SpecError) Error() string {
	if e.Name == "" {
		return "adapter: " + e.Msg
	}
	return fmt.Sprintf("adapter %q: %s", e.Name, e.Msg)
}
