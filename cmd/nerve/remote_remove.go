package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/remote"
)

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
	if err := remote.RemovePersonToken(config.Home(f.Getenv), opts.Name); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "removed remote %s\n", opts.Name)
	return nil
}
