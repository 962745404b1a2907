package adapter

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/config"
)

// Permission postures, chosen by the machine owner per adapter instance.
const (
	// PermWorkspace lets the agent edit files under its workdir and run
	// nerve's own query commands; anything else is denied at once.
	PermWorkspace = "workspace"
	// PermReadOnly allows reading and the query commands only.
	PermReadOnly = "read-only"
	// PermFull is the CLI's own bypass, for machines that are themselves a
	// sandbox.
	PermFull = "full"
)

// Default timeouts when nerve.yaml sets none. Agent CLIs get long turns
// because a real coding turn easily takes many minutes; exec commands are
// usually scripts and should not sit on a slot for half an hour.
const (
	DefaultAgentTimeout = 30 * time.Minute
	DefaultExecTimeout  = 10 * time.Minute
)

// kind describes one built-in adapter type: its default binary and how to
// build one turn's invocation.
type kind struct {
	binary  string
	timeout time.Duration
	build   func(a *cliAdapter, req Request) (*invocation, error)
}

// kinds is the one table of built-in types; Types keeps its order.
var kinds = map[string]kind{
	"claude": {binary: "claude", timeout: DefaultAgentTimeout, build: buildClaude},
	"codex":  {binary: "codex", timeout: DefaultAgentTimeout, build: buildCodex},
	"gemini": {binary: "gemini", timeout: DefaultAgentTimeout, build: buildGemini},
	"cursor": {binary: "cursor-agent", timeout: DefaultAgentTimeout, build: buildCursor},
	"hermes": {binary: "hermes", timeout: DefaultAgentTimeout, build: buildHermes},
	"exec":   {timeout: DefaultExecTimeout, build: buildExec},
}

var typeOrder = []string{"claude", "codex", "gemini", "cursor", "hermes", "exec"}

// Types returns the built-in adapter types in a stable order.
func Types() []string { return slices.Clone(typeOrder) }

// Builtin reports whether name is a built-in adapter type, usable as
// `adapter: NAME` with no configuration.
func Builtin(name string) bool {
	_, ok := kinds[name]
	return ok
}

// Info is what an adapter instance resolves to, for `nerve init` and
// `nerve validate` to show: which binary, posture and timeout a turn gets.
type Info struct {
	Name        string        `json:"name"`
	Type        string        `json:"type"`
	Binary      string        `json:"binary"`
	Permissions string        `json:"permissions"`
	Timeout     time.Duration `json:"timeout"`
	Model       string        `json:"model,omitempty"`
}

// Inspect checks an adapter instance like Validate and returns what it
// resolves to. It touches nothing: the binary is looked up at run time.
func Inspect(name string, c config.Adapter) (Info, error) {
	typ, err := resolveType(name, c)
	if err != nil {
		return Info{}, err
	}
	k := kinds[typ]
	info := Info{Name: name, Type: typ, Binary: k.binary, Permissions: c.Permissions,
		Timeout: c.Timeout.D(), Model: c.Model}
	if info.Permissions == "" {
		info.Permissions = PermWorkspace
	}
	if info.Timeout == 0 {
		info.Timeout = k.timeout
	}
	if typ == "exec" && len(c.Command) > 0 {
		info.Binary = c.Command[0]
	}
	if c.Binary != "" {
		info.Binary = c.Binary
	}
	return info, nil
}

// Validate reports the first problem with an adapter instance's
// configuration, with no side effects, so `nerve validate` can show it.
func Validate(name string, c config.Adapter) error {
	_, err := Inspect(name, c)
	return err
}

// New returns the adapter for one nerve.yaml instance. The type is c.Type,
// or name itself when c.Type is empty and name is a built-in type.
func New(name string, c config.Adapter) (Adapter, error) {
	info, err := Inspect(name, c)
	if err != nil {
		return nil, err
	}
	return &cliAdapter{info: info, cfg: c, build: kinds[info.Type].build}, nil
}

func resolveType(name string, c config.Adapter) (string, error) {
	if name == "" {
		return "", fmt.Errorf("adapter: empty name")
	}
	typ := c.Type
	if typ == "" {
		if !Builtin(name) {
			return "", fmt.Errorf("adapter %q: no type: set type to one of %s", name, strings.Join(typeOrder, ", "))
		}
		typ = name
	}
	if !Builtin(typ) {
		return "", fmt.Errorf("adapter %q: unknown type %q (want one of %s)", name, typ, strings.Join(typeOrder, ", "))
	}
	switch c.Permissions {
	case "", PermWorkspace, PermReadOnly, PermFull:
	default:
		return "", fmt.Errorf("adapter %q: unknown permissions %q (want %s, %s or %s)",
			name, c.Permissions, PermWorkspace, PermReadOnly, PermFull)
	}
	if typ == "exec" {
		if len(c.Command) == 0 || c.Command[0] == "" {
			return "", fmt.Errorf("adapter %q: type exec needs a command", name)
		}
	} else if len(c.Command) > 0 {
		// Silently ignoring it would run a different program than the
		// owner wrote down.
		return "", fmt.Errorf("adapter %q: command is only for type exec (use binary to point %s elsewhere)", name, typ)
	}
	if c.Timeout < 0 {
		return "", fmt.Errorf("adapter %q: negative timeout %s", name, c.Timeout)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return "", fmt.Errorf("adapter %q: bad env variable name %q", name, k)
		}
	}
	return typ, nil
}
