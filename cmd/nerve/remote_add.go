package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/remote"
)

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
		if exists := (*config.RemoteExistsError)(nil); errors.As(err, &exists) {
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
