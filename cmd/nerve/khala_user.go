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
	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"
	"github.com/nerve-agents/nerve/workflow"
)

// khalaUserOptions are the people commands' shared flags.
type khalaUserOptions struct {
	IO       *IOStreams
	DB       string
	Postgres string
	Scope    string
	JSON     bool
}

// newCmdKhalaUser groups the people commands: who may answer human turns.
func newCmdKhalaUser(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage the people who answer human turns on this Khala server",
		Long: `People answer the turns of human roles (human: true) with their own tokens,
never an agent's: 'nerve khala user add NAME' prints a person's token once (only
its hash is stored); they store it with 'nerve init --remote NAME=URL
--person-token TOKEN' and answer with 'nerve thread answer'. 'user remove'
stops the token at once. Like enroll-token, these work whether or not the
server runs, and against PostgreSQL with --postgres.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCmdKhalaUserAdd(f), newCmdKhalaUserList(f), newCmdKhalaUserRemove(f))
	return cmd
}

// userFlags adds --db and --postgres; resolve applies their defaults and
// checks the bbolt file for use.
func userFlags(f *Factory, cmd *cobra.Command, opts *khalaUserOptions, use khalaDBUse) func() error {
	cmd.Flags().StringVar(&opts.DB, "db", "", "the server's bbolt database file (default $NERVE_HOME/khala.db)")
	cmd.Flags().StringVar(&opts.Postgres, "postgres", "", "the replicas' PostgreSQL database (DSN; default $"+envKhalaPostgres+")")
	return func() error { return resolveKhalaDB(f, cmd, &opts.DB, &opts.Postgres, use) }
}

func (o *khalaUserOptions) run(ctx context.Context, req khala.UserRequest) ([]khala.User, string, error) {
	var (
		out []khala.User
		via = khala.ViaDatabase
		err error
	)
	if o.Postgres != "" {
		out, err = khala.UsersInPostgres(ctx, o.Postgres, req)
	} else {
		out, via, err = khala.UsersAt(ctx, o.DB, req)
	}
	if err != nil && !khala.IsRefusal(err) {
		err = khalaServeError(err)
	}
	return out, o.where(via), err
}

// where says which database a change went to, for the user.
func (o *khalaUserOptions) where(via string) string {
	switch {
	case o.Postgres != "":
		return "in " + khalapg.DisplayDSN(o.Postgres)
	case via == khala.ViaServer:
		return "through the server running on " + o.DB
	}
	return "in " + o.DB
}

func newCmdKhalaUserAdd(f *Factory) *cobra.Command {
	opts := &khalaUserOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a person and print their token (shown once)",
		Long: `Add a person and print their token (shown once). --scope says what they may
do: answer (human turns and the inbox), console (sign in to the web console),
cancel (cancel anyone's thread). The default is answer,console, what people
could do before scopes; people added before scopes keep exactly that.`,
		Example: "  T=$(nerve khala user add alice)\n  nerve khala user add bob --json\n  nerve khala user add carol --scope answer,cancel,console",
		Args:    exactArgs(1, "name the person"),
	}
	resolve := userFlags(f, cmd, opts, dbWrite)
	cmd.Flags().StringVar(&opts.Scope, "scope", strings.Join(khala.DefaultPersonScopes, ","), "what they may do: some of "+strings.Join(khala.PersonScopes, ","))
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print {"name", "token", "added_at", "scopes"}`)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := resolve(); err != nil {
			return err
		}
		if err := workflow.CheckPersonName(args[0]); err != nil {
			return usageErrorf("for example: nerve khala user add alice", "%s", err)
		}
		scopes, err := khala.ParseScopes(opts.Scope, khala.PersonScopes)
		if err != nil {
			return usageErrorf("for example: --scope answer,cancel", "--scope: %s", err)
		}
		out, where, err := opts.run(cmd.Context(), khala.UserRequest{Action: "add", Name: args[0], Scopes: scopes})
		if err != nil {
			return err
		}
		u := out[0]
		if opts.JSON {
			return json.NewEncoder(opts.IO.Out).Encode(u)
		}
		// The token alone on stdout, so T=$(nerve khala user add NAME) works.
		fmt.Fprintln(opts.IO.Out, u.Token)
		fmt.Fprintf(opts.IO.ErrOut, "person %s added with scopes %s %s; the token is shown once: give it to them for 'nerve init --remote NAME=URL --person-token TOKEN'\n", u.Name, strings.Join(u.Scopes, ","), where)
		return nil
	}
	return cmd
}

func newCmdKhalaUserList(f *Factory) *cobra.Command {
	opts := &khalaUserOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the people who may answer human turns",
		Args:  cobra.NoArgs,
	}
	resolve := userFlags(f, cmd, opts, dbExisting)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print [{"name", "added_at", "scopes"}]`)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := resolve(); err != nil {
			return err
		}
		out, _, err := opts.run(cmd.Context(), khala.UserRequest{Action: "list"})
		if err != nil {
			return err
		}
		if opts.JSON {
			type userJSON struct {
				Name    string    `json:"name"`
				AddedAt time.Time `json:"added_at"`
				Scopes  []string  `json:"scopes"` // null: added before scopes (answer,console)
			}
			list := make([]userJSON, 0, len(out))
			for _, u := range out {
				list = append(list, userJSON{Name: u.Name, AddedAt: u.AddedAt, Scopes: u.Scopes})
			}
			return json.NewEncoder(opts.IO.Out).Encode(list)
		}
		if len(out) == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "no people yet; add one with: nerve khala user add NAME")
			return nil
		}
		tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDED\tSCOPES")
		for _, u := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, u.AddedAt.Local().Format(time.RFC3339), khala.DescribeScopes(u.Scopes, true))
		}
		return tw.Flush()
	}
	return cmd
}

func newCmdKhalaUserRemove(f *Factory) *cobra.Command {
	opts := &khalaUserOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a person: their token stops working at once",
		Args:  exactArgs(1, "name the person"),
	}
	resolve := userFlags(f, cmd, opts, dbExisting)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := resolve(); err != nil {
			return err
		}
		_, where, err := opts.run(cmd.Context(), khala.UserRequest{Action: "remove", Name: args[0]})
		if err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "person %s removed %s; their token no longer works\n", args[0], where)
		return nil
	}
	return cmd
}
