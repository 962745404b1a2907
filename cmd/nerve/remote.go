package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/remote"
	"github.com/spf13/cobra"
)

var remoteNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func newCmdRemote(f *Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "remote", Short: "Manage Khala remotes, git-style"}
	cmd.AddCommand(newCmdRemoteAdd(f, nil), newCmdRemoteList(f, nil), newCmdRemoteRemove(f, nil))
	return cmd
}

// configPath is the nerve.yaml that edits go to.
func (f *Factory) configPath() string {
	if f.configFile != "" {
		return f.configFile
	}
	return config.Paths{Home: config.Home(f.Getenv)}.Config()
}

// checkRemote checks a remote's name and URL as given on the command line
// (what is a flag or an argument: name it in what), in nerve's words.
func checkRemote(what, name, raw string) error {
	if !remoteNameRE.MatchString(name) {
		return usageErrorf("use letters, digits, '-', '_' and '.'", "%s: bad remote name %q", what, name)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(raw, " \t\n") {
		return usageErrorf("give an http(s) URL, e.g. http://127.0.0.1:7700", "%s: %q is not an http(s) URL", what, raw)
	}
	return nil
}

type remoteAddOptions struct {
	Name string
	URL  string
}

func newCmdRemoteAdd(f *Factory, runF func(*remoteAddOptions) error) *cobra.Command {
	opts := &remoteAddOptions{}
	return &cobra.Command{
		Use:     "add NAME URL",
		Short:   "Add a remote",
		Long:    "Add a remote. A name that exists is refused, as git refuses it; to change a remote's URL, edit remotes.NAME.url in nerve.yaml.",
		Example: "  nerve remote add origin http://127.0.0.1:7700",
		Args:    exactArgs(2, "name the remote and its URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.URL = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return remoteAddRun(f, opts)
		},
	}
}

func remoteAddRun(f *Factory, opts *remoteAddOptions) error {
	if err := checkRemote("remote add", opts.Name, opts.URL); err != nil {
		return err
	}
	home := config.Home(f.Getenv)
	if _, err := ensureDir(home); err != nil {
		return err
	}
	if err := config.AddRemote(f.configPath(), opts.Name, opts.URL); err != nil {
		if _, ok := err.(*config.RemoteExistsError); ok {
			return &usageError{msg: err.Error(), hint: "pick another name; to change its URL, edit remotes." + opts.Name + ".url in " + displayPath(f.configPath())}
		}
		return err
	}
	fmt.Fprintf(f.IO.Out, "remote %s is %s\n", opts.Name, opts.URL)
	if tok, _ := remote.LoadToken(home, opts.Name); tok == "" {
		fmt.Fprintf(f.IO.ErrOut, "enroll this agent with it: nerve init --remote %s=%s --enroll-token TOKEN\n", opts.Name, opts.URL)
	}
	return nil
}

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

type remoteRemoveOptions struct {
	Name string
}

func newCmdRemoteRemove(f *Factory, runF func(*remoteRemoveOptions) error) *cobra.Command {
	opts := &remoteRemoveOptions{}
	return &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a remote and forget this agent's token for it",
		Args:    exactArgs(1, "name the remote"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return remoteRemoveRun(f, opts)
		},
	}
}

func remoteRemoveRun(f *Factory, opts *remoteRemoveOptions) error {
	found, err := config.RemoveRemote(f.configPath(), opts.Name)
	if err != nil {
		return err
	}
	if !found {
		return &remote.UnknownError{Name: opts.Name}
	}
	if err := remote.RemoveToken(config.Home(f.Getenv), opts.Name); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "removed remote %s\n", opts.Name)
	return nil
}
