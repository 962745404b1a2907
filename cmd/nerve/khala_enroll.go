package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/khala"
)

type khalaEnrollOptions struct {
	IO       *IOStreams
	DB       string
	Postgres string
	Uses     int
	TTL      time.Duration
	Scope    string
	Scopes   []string
	JSON     bool
}

func newCmdKhalaEnrollToken(f *Factory, runF func(*khalaEnrollOptions) error) *cobra.Command {
	opts := &khalaEnrollOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "enroll-token",
		Short: "Issue an enrollment token with which agents join this Khala server",
		Long: `nerve khala enroll-token prints a new enrollment token for the Khala database
(default $NERVE_HOME/khala.db). An agent joins with it once:
  nerve init --remote origin=URL --enroll-token TOKEN

It works whether or not the server runs: with no server it writes the database
itself; while 'nerve khala serve' holds the file, it asks that server through
the admin file the server keeps beside the database (FILE.admin, mode 0600).
A --db that does not exist is refused: the server creates its own database.
With --postgres DSN (or NERVE_KHALA_POSTGRES) it writes the token to that
PostgreSQL database, which every replica serving it then accepts.
Only the token's hash is stored; the token is shown once.

--scope says what the agents it enrolls may do: claim (claim and answer
turns), start (start threads), publish (publish workflows: their own only).
The default, claim,start,publish, is what agents could do before scopes
less publishing over, cancelling or attaching children to what other agents
published and started (that takes a person with the cancel scope, or the
admin). Agents enrolled before scopes keep everything they could do until
revoked ('nerve khala agent revoke NAME') and enrolled again.`,
		Example: `  nerve khala enroll-token
  nerve khala enroll-token --uses 5 --ttl 72h --json
  nerve khala enroll-token --scope claim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := resolveKhalaDB(f, cmd, &opts.DB, &opts.Postgres, dbWrite); err != nil {
				return err
			}
			if opts.Uses < 1 {
				return usageErrorf("a token enrolls at least one agent", "--uses %d: want 1 or more", opts.Uses)
			}
			scopes, err := khala.ParseScopes(opts.Scope, khala.AgentScopes)
			if err != nil {
				return usageErrorf("for example: --scope claim,start", "--scope: %s", err)
			}
			opts.Scopes = scopes
			if runF != nil {
				return runF(opts)
			}
			return khalaEnrollRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DB, "db", "", "the server's bbolt database file (default $NERVE_HOME/khala.db)")
	cmd.Flags().StringVar(&opts.Postgres, "postgres", "", "the replicas' PostgreSQL database (DSN; default $"+envKhalaPostgres+")")
	cmd.Flags().IntVar(&opts.Uses, "uses", 1, "how many agents may enroll with it")
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 24*time.Hour, "how long it is valid (0: no expiry)")
	cmd.Flags().StringVar(&opts.Scope, "scope", strings.Join(khala.DefaultAgentScopes, ","), "what the agents it enrolls may do: some of "+strings.Join(khala.AgentScopes, ","))
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print {"token", "uses", "expires_at", "scopes"}`)
	return cmd
}

func khalaEnrollRun(ctx context.Context, opts *khalaEnrollOptions) error {
	var (
		resp khala.EnrollTokenResponse
		via  string
		err  error
	)
	if opts.Postgres != "" {
		resp, err = khala.IssuePostgresToken(ctx, opts.Postgres, opts.Uses, opts.TTL, opts.Scopes...)
	} else {
		resp, via, err = khala.IssueToken(ctx, opts.DB, opts.Uses, opts.TTL, opts.Scopes...)
	}
	if err != nil {
		return khalaServeError(err)
	}
	if opts.JSON {
		// Every key, expires_at null for a token that does not expire.
		out := struct {
			Token     string     `json:"token"`
			Uses      int        `json:"uses"`
			ExpiresAt *time.Time `json:"expires_at"`
			Scopes    []string   `json:"scopes"`
		}{Token: resp.Token, Uses: resp.Uses, Scopes: resp.Scopes}
		if !resp.ExpiresAt.IsZero() {
			out.ExpiresAt = &resp.ExpiresAt
		}
		return json.NewEncoder(opts.IO.Out).Encode(out)
	}
	// The token alone on stdout, so T=$(nerve khala enroll-token) works.
	fmt.Fprintln(opts.IO.Out, resp.Token)
	until := "no expiry"
	if !resp.ExpiresAt.IsZero() {
		until = "valid until " + resp.ExpiresAt.Local().Format(time.RFC3339)
	}
	how := "written to " + opts.DB
	switch {
	case opts.Postgres != "":
		how = "written to " + khalapg.DisplayDSN(opts.Postgres)
	case via == khala.ViaServer:
		how = "issued by the server running on " + opts.DB
	}
	fmt.Fprintf(opts.IO.ErrOut, "enrollment token for %d agent(s) with scopes %s, %s; %s\n", resp.Uses, strings.Join(resp.Scopes, ","), until, how)
	return nil
}
