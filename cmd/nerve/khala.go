package main

import (
	"github.com/spf13/cobra"
)

// newCmdKhala groups the Khala server's commands.
func newCmdKhala(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "khala",
		Short: "Run a Khala server: the shared turn queue of a pool of agents",
		Long: `A Khala server stores cloud workflows and their threads, runs each thread's
moderator, queues the turns it emits and leases each to one agent at a time.
Agents reach it as a remote (nerve remote add origin URL).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCmdKhalaServe(f, nil), newCmdKhalaEnrollToken(f, nil), newCmdKhalaUser(f), newCmdKhalaAgent(f))
	return cmd
}
