package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
)

// daemonState is the --json answer of daemon start and stop: every key,
// null when empty.
type daemonState struct {
	Running bool    `json:"running"`
	PID     *int    `json:"pid"`
	Home    string  `json:"home"`
	Log     *string `json:"log"`
	Already bool    `json:"already"` // it was already so
}

type daemonStartOptions struct {
	JSON bool
}

func newCmdDaemonStart(f *Factory, runF func(*daemonStartOptions) error) *cobra.Command {
	opts := &daemonStartOptions{}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return daemonStartRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the outcome as JSON")
	return cmd
}

func daemonStartRun(ctx context.Context, f *Factory, opts *daemonStartOptions) error {
	home := config.Home(f.Getenv)
	logPath := config.Paths{Home: home}.Log()
	c := daemon.NewClient(config.Paths{Home: home}.Socket())
	if st, serr := c.Status(ctx); serr == nil {
		if opts.JSON {
			return json.NewEncoder(f.IO.Out).Encode(daemonState{Running: true, PID: &st.PID, Home: home, Log: &logPath, Already: true})
		}
		fmt.Fprintf(f.IO.Out, "nerve daemon already running (pid %d, NERVE_HOME=%s)\n", st.PID, home)
		return nil
	}
	if _, err := f.Config(); err != nil {
		return err // a bad nerve.yaml is reported here, not in nerve.log
	}
	var extra []string
	if f.configFile != "" {
		extra = append(extra, "--config", f.configFile)
	}
	pid, err := daemon.Spawn(ctx, f.Executable, home, extra...)
	if err != nil {
		return err
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(daemonState{Running: true, PID: &pid, Home: home, Log: &logPath})
	}
	fmt.Fprintf(f.IO.Out, "nerve daemon started (pid %d, NERVE_HOME=%s, log %s)\n", pid, home, logPath)
	return nil
}
