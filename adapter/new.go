package adapter

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/internal/sandbox"
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

// permissions lists the postures in the order they are offered.
var permissions = []string{PermWorkspace, PermReadOnly, PermFull}

// Default timeouts when nerve.yaml sets none. Agent CLIs get long turns
// because a real coding turn easily takes many minutes; exec commands are
// usually scripts and should not sit on a slot for half an hour.
const (
	DefaultAgentTimeout = 30 * time.Minute
	DefaultExecTimeout  = 10 * time.Minute
)

// kind describes one built-in adapter type: its name, default binary and
// how to build one turn's invocation.
type kind struct {
	name    string
	binary  string
	timeout time.Duration
	build   func(a *cliAdapter, req Request) (*invocation, error)
	// fullOnly: nerve cannot hold the CLI to a narrower posture (crush
	// run approves every tool itself), so its permissions must say full.
	fullOnly bool
}

// kinds is the one table of built-in types, in the order they are offered;
// config validation, `nerve init` and `nerve validate` read it through
// Types and Builtin.
var kinds = []kind{
	{name: "claude", binary: "claude", timeout: DefaultAgentTimeout, build: buildClaude},
	{name: "codex", binary: "codex", timeout: DefaultAgentTimeout, build: buildCodex},
	{name: "gemini", binary: "gemini", timeout: DefaultAgentTimeout, build: buildGemini},
	{name: "cursor", binary: "cursor-agent", timeout: DefaultAgentTimeout, build: buildCursor},
	{name: "hermes", binary: "hermes", timeout: DefaultAgentTimeout, build: buildHermes},
	{name: "qwen", binary: "qwen", timeout: DefaultAgentTimeout, build: buildQwen},
	{name: "opencode", binary: "opencode", timeout: DefaultAgentTimeout, build: buildOpencode},
	{name: "copilot", binary: "copilot", timeout: DefaultAgentTimeout, build: buildCopilot},
	{name: "pi", binary: "pi", timeout: DefaultAgentTimeout, build: buildPi},
	{name: "crush", binary: "crush", timeout: DefaultAgentTimeout, build: buildCrush, fullOnly: true},
	{name: "kilo", binary: "kilo", timeout: DefaultAgentTimeout, build: buildKilo},
	{name: "droid", binary: "droid", timeout: DefaultAgentTimeout, build: buildDroid},
	{name: "continue", binary: "cn", timeout: DefaultAgentTimeout, build: buildContinue},
	{name: "auggie", binary: "auggie", timeout: DefaultAgentTimeout, build: buildAuggie},
	{name: "exec", timeout: DefaultExecTimeout, build: buildExec},
}

func kindOf(name string) (kind, bool) {
	i := slices.IndexFunc(kinds, func(k kind) bool { return k.name == name })
	if i < 0 {
		return kind{}, false
	}
	return kinds[i], true
}

// Types returns the built-in adapter types in a stable order.
func Types() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

// Builtin reports whether name is a built-in adapter type, usable as
// `adapter: NAME` with no configuration (exec aside, which needs a command).
func Builtin(name string) bool {
	_, ok := kindOf(name)
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
func Inspect(name string, c Spec) (Info, error) {
	typ, err := resolveType(name, c)
	if err != nil {
		return Info{}, err
	}
	k, _ := kindOf(typ)
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
// configuration, with no side effects: a *SpecError naming the field.
func Validate(name string, c Spec) error {
	_, err := Inspect(name, c)
	return err
}

// New returns the adapter for one nerve.yaml instance. The type is c.Type,
// or name itself when c.Type is empty and name is a built-in type.
func New(name string, c Spec) (Adapter, error) {
	info, err := Inspect(name, c)
	if err != nil {
		return nil, err
	}
	k, _ := kindOf(info.Type)
	return &cliAdapter{info: info, cfg: c, build: k.build}, nil
}

func resolveType(name string, c Spec) (string, error) {
	bad := func(field, format string, a ...any) (string, error) {
		return "", &SpecError{Name: name, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	if name == "" {
		return bad("", "empty name")
	}
	typ := c.Type
	if typ == "" {
		if !Builtin(name) {
			return bad("type", "no type: it is not built in, so set type to one of %s", strings.Join(Types(), ", "))
		}
		typ = name
	}
	if !Builtin(typ) {
		return bad("type", "unknown type %q (want one of %s)", typ, strings.Join(Types(), ", "))
	}
	if !slices.Contains(permissions, c.Permissions) && c.Permissions != "" {
		return bad("permissions", "unknown permissions %q (want %s, %s or %s)", c.Permissions, PermWorkspace, PermReadOnly, PermFull)
	}
	if k, _ := kindOf(typ); k.fullOnly && c.Permissions != PermFull {
		return bad("permissions", "type %s approves every tool itself, so nerve cannot hold it to workspace or read-only: set permissions: full on a machine that is itself a sandbox", typ)
	}
	if typ == "exec" {
		if len(c.Command) == 0 || c.Command[0] == "" {
			return bad("command", "type exec needs a command")
		}
	} else if len(c.Command) > 0 {
		// Silently ignoring it would run a different program than the
		// owner wrote down.
		return bad("command", "command is only for type exec (use binary to point %s elsewhere)", typ)
	}
	if c.Sandbox != "" && !slices.Contains(sandbox.Modes, c.Sandbox) {
		return bad("sandbox", "unknown sandbox mode %q (want one of %s)", c.Sandbox, strings.Join(sandbox.Modes, ", "))
	}
	if c.Timeout < 0 {
		return bad("timeout", "negative timeout %s", c.Timeout)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("env", "bad env variable name %q", k)
		}
	}
	return typ, nil
}
