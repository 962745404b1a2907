package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/internal/procstat"
)

type daemonStopOptions struct {
	Timeout time.Duration
	JSON    bool
}

func newCmdDaemonStop(f *Factory, runF func(*daemonStopOptions) error) *cobra.Command {
	opts := &daemonStopOptions{}
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the background daemon gracefully",
		Long: `Ask the daemon to stop gracefully and wait until it has exited. Ctrl-C
ends the wait, not the shutdown: the daemon goes on stopping.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return daemonStopRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 60*time.Second, "how long to wait for the daemon to exit")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the outcome as JSON")
	return cmd
}

// shutdownAskTimeout bounds the request that asks the daemon to stop (an
// answer from a local socket, normally at once).
const shutdownAskTimeout = 10 * time.Second

func daemonStopRun(ctx context.Context, f *Factory, opts *daemonStopOptions) error {
	paths := config.Paths{Home: config.Home(f.Getenv)}
	c := controlClient(f.Getenv) // a turn's socket refuses it
	// Ctrl-C ends the wait, not the asking: a request cut off after the
	// daemon took it would leave the daemon stopping and say nothing. So
	// the command's signal handler goes in before it asks (asking ctx is
	// what installs it): a Ctrl-C once the daemon is stopping is ours to
	// report, not a kill of this process.
	ctx.Done()
	askCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownAskTimeout)
	pid, err := c.Shutdown(askCtx)
	cancel()
	var nr *daemon.NotRunningError
	if errors.As(err, &nr) && !nr.Turn {
		if opts.JSON {
			return json.NewEncoder(f.IO.Out).Encode(daemonState{Home: paths.Home, Already: true})
		}
		fmt.Fprintln(f.IO.Out, "nerve daemon is not running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := waitExit(ctx, pid, opts.Timeout); err != nil {
		if errors.Is(err, context.Canceled) {
			// The shutdown was asked for and goes on; only the wait ends.
			fmt.Fprintf(f.IO.ErrOut, "stopped waiting; the daemon (pid %d) goes on shutting down ('nerve daemon status' shows when it is gone)\n", pid)
			return err
		}
		return fmt.Errorf("daemon (pid %d) still running after %s; see %s", pid, opts.Timeout, paths.Log())
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(daemonState{PID: &pid, Home: paths.Home})
	}
	fmt.Fprintf(f.IO.Out, "nerve daemon stopped (pid %d)\n", pid)
	return nil
}

// waitExit waits until process pid has exited, for at most timeout or
// until ctx is done (Ctrl-C).
func waitExit(ctx context.Context, pid int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !procstat.Exited(pid) { // a zombie is done too: init may reap it late
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
	return nil
}
