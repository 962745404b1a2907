package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/mcp"
	"github.com/nerve-agents/nerve/remote"
)

// MCPOptions are the inputs of `nerve mcp`.
type MCPOptions struct {
	IO *IOStreams
	// Server is what the MCP server works with; each part is reached on
	// the first call that needs it, so start-up touches nothing.
	Server mcp.Options

	ctx context.Context
}

func newCmdMCP(f *Factory, runF func(*MCPOptions) error) *cobra.Command {
	opts := &MCPOptions{IO: f.IO, Server: mcp.Options{
		Getenv: f.Getenv,
		Config: f.Config,
		Daemon: f.daemonClient,
		Remote: func(name string) (*remote.Client, error) { return remoteClient(f, name) },
	}}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve nerve's tools to agents and IDEs over the Model Context Protocol (stdio)",
		Long: `Serve the Model Context Protocol on stdin and stdout, for an agent CLI, an IDE or any MCP client.

Tools: thread_messages, thread_status, notify (info, warning or blocking, into the thread's trace),
knowledge_query, workflow_list and workflow_run. Inside a turn (NERVE_THREAD set) the thread
defaults to the turn's, thread_messages answers from the turn's snapshot, and the daemon is
reached through the turn's own socket (NERVE_TURN_SOCKET), with the turn's rights only.
--read-only offers the read tools only. When stdin closes, it answers the requests already read, then exits (after
an hour and a minute, the longest a call may take, it gives up on those still unanswered: exit 1).`,
		Example: `  claude mcp add nerve -- nerve mcp
  nerve mcp --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return mcpRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Server.ReadOnly, "read-only", false, "offer only the tools that read (no notify, no workflow_run)")
	return cmd
}

func mcpRun(opts *MCPOptions) error {
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	opts.Server.Version = currentVersion().Version
	// stdout carries the protocol; the SDK's diagnostics go to stderr.
	opts.Server.Log = slog.New(slog.NewTextHandler(opts.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return mcp.Run(ctx, opts.Server, mcp.StdioTransport(opts.IO.In, opts.IO.Out))
}
