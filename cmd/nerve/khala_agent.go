package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/khala"
)

// newCmdKhalaAgent groups the enrolled agents' commands: who they are,
// what their tokens may do, and revoking one.
func newCmdKhalaAgent(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "List and revoke the agents enrolled on this Khala server",
		Long: `'nerve khala agent list' shows the enrolled agents with their tokens' scopes
(an agent enrolled before scopes shows "legacy": it keeps everything agents
could do then, others' workflows and threads included, until it is revoked
and enrolled again). 'agent revoke NAME' deletes the agent: its token stops
working at once, on every replica of a PostgreSQL Khala too. Like user, these
work whether or not the server runs, and against PostgreSQL with --postgres.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCmdKhalaAgentList(f), newCmdKhalaAgentRevoke(f))
	return cmd
}

func (o *khalaUserOptions) runAgents(ctx context.Context, req khala.AgentRequest) ([]khala.AgentInfo, string, error) {
	var (
		out []khala.AgentInfo
		via = khala.ViaDatabase
		err error
	)
	if o.Postgres != "" {
		out, err = khala.AgentsInPostgres(ctx, o.Postgres, req)
	} else {
		out, via, err = khala.AgentsAt(ctx, o.DB, req)
	}
	if err != nil && !khala.IsRefusal(err) {
		err = khalaServeError(err)
	}
	return out, o.where(via), err
}

func newCmdKhalaAgentList(f *Factory) *cobra.Command {
	opts := &khalaUserOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the enrolled agents and their tokens' scopes",
		Args:  cobra.NoArgs,
	}
	resolve := userFlags(f, cmd, opts, dbExisting)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print [{"name", "enrolled_at", "last_seen", "turns_held", "scopes"}] (scopes null: legacy)`)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := resolve(); err != nil {
			return err
		}
		out, _, err := opts.runAgents(cmd.Context(), khala.AgentRequest{Action: "list"})
		if err != nil {
			return err
		}
		if opts.JSON {
			return json.NewEncoder(opts.IO.Out).Encode(out)
		}
		if len(out) == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "no agents yet; enroll one with a token from: nerve khala enroll-token")
			return nil
		}
		tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tENROLLED\tSCOPES\tHELD")
		for _, a := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Name, a.EnrolledAt.Local().Format(time.RFC3339),
				khala.DescribeScopes(a.Scopes, false), strings.Join(a.TurnsHeld, ","))
		}
		return tw.Flush()
	}
	return cmd
}

func newCmdKhalaAgentRevoke(f *Factory) *cobra.Command {
	opts := &khalaUserOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an agent: its token stops working at once",
		Args:  exactArgs(1, "name the agent (nerve khala agent list shows them)"),
	}
	resolve := userFlags(f, cmd, opts, dbExisting)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := resolve(); err != nil {
			return err
		}
		_, where, err := opts.runAgents(cmd.Context(), khala.AgentRequest{Action: "revoke", Name: args[0]})
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "agent %s revoked %s; its token no longer works (turns it held return to the queue when their leases end)\n", args[0], where)
		return nil
	}
	return cmd
}
