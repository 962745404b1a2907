package main

import (
	"context"
	"encoding/json"
	"fmt"
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
		Use:     "add NAME",
		Short:   "Add a person and print their token (shown once)",
		Example: "  T=$(nerve khala user add alice)\n  nerve khala user add bob --json",
		Args:    exactArgs(1, "name the person"),
	}
	resolve := userFlags(f, cmd, opts, dbWrite)
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print {"name", "token", "added_at"}`)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := resolve(); err != nil {
			return err
		}
		if err := workflow.CheckPersonName(args[0]); err != nil {
			return usageErrorf("for example: nerve khala user add alice", "%s", err)
		}
		out, where, err := opts.run(cmd.Context(), khala.UserRequest{Action: "add", Name: args[0]})
		if err != nil {
			return err
		}
		u := out[0]
		if opts.JSON {
			return json.NewEncoder(opts.IO.Out).Encode(u)
		}
		// The token alone on stdout, so T=$(nerve khala user add NAME) works.
		fmt.Fprintln(opts.IO.Out, u.Token)
		fmt.Fprintf(opts.IO.ErrOut, "person %s added %s; the token is shown once: give it to them for 'nerve init --remote NAME=URL --person-token TOKEN'\n", u.Name, where)
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
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print [{"name", "added_at"}]`)
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
			}
			list := make([]userJSON, 0, len(out))
			for _, u := range out {
				list = append(list, userJSON{Name: u.Name, AddedAt: u.AddedAt})
			}
			return json.NewEncoder(opts.IO.Out).Encode(list)
		}
		if len(out) == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "no people yet; add one with: nerve khala user add NAME")
			return nil
		}
		tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADDED")
		for _, u := range out {
			fmt.Fprintf(tw, "%s\t%s\n", u.Name, u.AddedAt.Local().Format(time.RFC3339))
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
