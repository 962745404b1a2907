package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/remote"
)

type remoteListOptions struct {
	JSON bool
}

// remoteEntry is the stable --json shape of `remote list`.
type remoteEntry struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Enrolled bool   `json:"enrolled"`
}

func newCmdRemoteList(f *Factory, runF func(*remoteListOptions) error) *cobra.Command {
	opts := &remoteListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List remotes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return remoteListRun(f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON array")
	return cmd
}

func remoteListRun(f *Factory, opts *remoteListOptions) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	out := []remoteEntry{}
	for _, n := range sortedNames(cfg.Remotes) {
		tok, _ := remote.LoadToken(cfg.Home, n)
		out = append(out, remoteEntry{n, cfg.Remotes[n].URL, tok != ""})
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(out)
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	for _, e := range out {
		state := "enrolled"
		if !e.Enrolled {
			state = "not enrolled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.URL, state)
	}
	return tw.Flush()
}
