package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"text/tabwriter"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/remote"
	"github.com/spf13/cobra"
)

var remoteNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func newCmdRemote(f *Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "remote", Short: "Manage Khala remotes, git-style"}
	cmd.AddCommand(newCmdRemoteAdd(f), newCmdRemoteList(f), newCmdRemoteRemove(f))
	return cmd
}

// configPath is the nerve.yaml that edits go to.
func (f *Factory) configPath() string {
	if f.configFile != "" {
		return f.configFile
	}
	return config.Paths{Home: config.Home(f.Getenv)}.Config()
}

func newCmdRemoteAdd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "add NAME URL",
		Short:   "Add a remote (or change its URL)",
		Example: "  nerve remote add origin http://127.0.0.1:7700",
		Args:    exactArgs(2, "name the remote and its URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, raw := args[0], args[1]
			if !remoteNameRE.MatchString(name) {
				return usageErrorf("use letters, digits, '-', '_' and '.'", "bad remote name %q", name)
			}
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageErrorf("e.g. http://127.0.0.1:7700", "%q is not an http(s) URL", raw)
			}
			home := config.Home(f.Getenv)
			if _, err := ensureDir(home); err != nil {
				return err
			}
			if err := config.SetRemote(f.configPath(), name, raw); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "remote %s is %s\n", name, raw)
			if tok, _ := remote.LoadToken(home, name); tok == "" {
				fmt.Fprintf(f.IO.ErrOut, "enroll this agent with it: nerve init --remote %s=%s --enroll-token TOKEN\n", name, raw)
			}
			return nil
		},
	}
}

func newCmdRemoteList(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List remotes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.Config()
			if err != nil {
				return err
			}
			type entry struct {
				Name     string `json:"name"`
				URL      string `json:"url"`
				Enrolled bool   `json:"enrolled"`
			}
			out := []entry{}
			for _, n := range sortedNames(cfg.Remotes) {
				tok, _ := remote.LoadToken(cfg.Home, n)
				out = append(out, entry{n, cfg.Remotes[n].URL, tok != ""})
			}
			if asJSON {
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
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func newCmdRemoteRemove(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a remote and forget this agent's token for it",
		Args:    exactArgs(1, "name the remote"),
		RunE: func(cmd *cobra.Command, args []string) error {
			found, err := config.RemoveRemote(f.configPath(), args[0])
			if err != nil {
				return err
			}
			if !found {
				return &remote.UnknownError{Name: args[0]}
			}
			if err := remote.RemoveToken(config.Home(f.Getenv), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Out, "removed remote %s\n", args[0])
			return nil
		},
	}
}
