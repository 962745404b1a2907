package adapter

import (
	"context"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/usage"
)

// Adapter runs one agent CLI as a subprocess for one turn.
type Adapter interface {
	// Name is the instance name from nerve.yaml ("claude", "claude-fast").
	Name() string
	// Type is the built-in kind: claude, codex, gemini, cursor, hermes, qwen,
	// opencode, exec.
	Type() string
	// Run runs one turn to completion. It returns an error (see *Error) when
	// the CLI's own final event does not report success, when the turn
	// times out, or when ctx is cancelled; the whole process group is gone
	// by the time Run returns.
	Run(ctx context.Context, req Request) (*Result, error)
}

// Request is one turn's work.
type Request struct {
	Prompt  string
	Workdir string
	// Env is added to os.Environ(): NERVE_THREAD, NERVE_ROLE, NERVE_STEP,
	// NERVE_WORKDIR, NERVE_THREAD_SNAPSHOT, PATH with the nerve binary.
	Env []string
	// OnOutput, when set, is called (from one goroutine) for each line the
	// CLI prints on stdout; the daemon uses it for stall detection.
	OnOutput func(line []byte)
	// OnStart, when set, is called with the CLI's pid (its process group
	// id) once it runs, so the daemon can kill a group left behind by a
	// crash of its own, and tell the turn's leader from what escaped one
	// (procgroup.Settled waits for it).
	OnStart func(pid int)
	// MCP, when set, is nerve's MCP server, registered with the CLI for
	// this turn by the adapters whose CLI speaks MCP (exec, cursor and
	// hermes ignore it).
	MCP *MCPServer
	// Sandbox, when set, is the turn's sandbox: the CLI runs inside it
	// (bwrap), with its environment instead of the daemon's; nil runs the
	// CLI as the owner.
	Sandbox *sandbox.Spec
}

// Result is what a successful turn produced.
type Result struct {
	Content string      `json:"content"`
	Usage   usage.Usage `json:"usage"`
	// Truncated reports that the CLI printed more than MaxContentBytes of
	// content and the rest was dropped (Content then ends with a note).
	Truncated bool `json:"truncated,omitempty"`
}
