package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type daemonOptions struct {
	LogLevel string
	Name     string
	// Flags are the command's flags, which override nerve.yaml's keys.
	Flags *pflag.FlagSet
}

func newCmdDaemon(f *Factory, runF func(*daemonOptions) error) *cobra.Command {
	opts := &daemonOptions{}
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the nerve daemon in the foreground, or manage the background one",
		Long: `nerve daemon runs the daemon of this NERVE_HOME in the foreground.
It owns nerve.db, runs local threads and serves the CLI on nerve.sock.
SIGTERM stops it gracefully: no new turns, running ones get a grace period.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Flags = cmd.Flags()
			if runF != nil {
				return runF(opts)
			}
			return runDaemon(f, opts.Flags, cmd)
		},
	}
	cmd.Flags().StringVar(&opts.LogLevel, "log-level", "", "debug, info, warn or error (overrides log.level)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "this agent's name (overrides agent.name)")
	cmd.AddCommand(newCmdDaemonStart(f, nil), newCmdDaemonStop(f, nil), newCmdDaemonStatus(f, nil))
	return cmd
}

func runDaemon(f *Factory, flags *pflag.FlagSet, cmd *cobra.Command) error {
	load := func() (*config.Config, error) {
		return config.Load(config.LoadOptions{File: f.configFile, Getenv: f.Getenv, Flags: flags})
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	logger := log.NewWithOptions(f.IO.ErrOut, log.Options{ReportTimestamp: true, TimeFormat: time.RFC3339, Prefix: "nerved"})
	if lvl, err := log.ParseLevel(cfg.Log.Level); err == nil {
		logger.SetLevel(lvl)
	}
	switch cfg.Log.Format {
	case "json":
		logger.SetFormatter(log.JSONFormatter)
	case "logfmt":
		logger.SetFormatter(log.LogfmtFormatter)
	}
	// The first SIGTERM or Ctrl-C (cmd's context) starts a graceful
	// shutdown; a second one cuts the grace period short.
	hurry := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-cmd.Context().Done()
		select {
		case <-sigs: // the first signal, already seen by the context
		case <-time.After(100 * time.Millisecond):
		}
		<-sigs
		logger.Warn("second signal: killing running turns now")
		close(hurry)
	}()
	return daemon.Run(cmd.Context(), daemon.Options{
		Config: cfg, Load: load, Executable: f.Executable,
		Version: currentVersion().Version, Logger: logger, Hurry: hurry,
	})
}

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

func daemonStopRun(ctx context.Context, f *Factory, opts *daemonStopOptions) error {
	paths := config.Paths{Home: config.Home(f.Getenv)}
	c := daemon.NewClient(paths.Socket())
	pid, err := c.Shutdown(ctx)
	var nr *daemon.NotRunningError
	if errors.As(err, &nr) {
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
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
	return nil
}

type daemonStatusOptions struct {
	JSON bool
}

func newCmdDaemonStatus(f *Factory, runF func(*daemonStatusOptions) error) *cobra.Command {
	opts := &daemonStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's state: pid, config, active turns, capacity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return daemonStatusRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print as JSON")
	return cmd
}

func daemonStatusRun(ctx context.Context, f *Factory, opts *daemonStatusOptions) error {
	paths := config.Paths{Home: config.Home(f.Getenv)}
	st, err := daemon.NewClient(paths.Socket()).Status(ctx)
	var nr *daemon.NotRunningError
	if errors.As(err, &nr) {
		if opts.JSON {
			_ = json.NewEncoder(f.IO.Out).Encode(notRunningStatus(paths.Home))
		} else {
			fmt.Fprintf(f.IO.Out, "nerve daemon: not running (NERVE_HOME=%s)\n", paths.Home)
		}
		return errSilentFail
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(struct {
			Running bool `json:"running"`
			*daemon.Status
		}{true, st})
	}
	printStatus(f.IO, st)
	return nil
}

// notRunningStatus is daemon status --json of a daemon that is not
// running: the keys of a running one's, null, so scripts find each key.
func notRunningStatus(home string) map[string]any {
	out := map[string]any{}
	if b, err := json.Marshal(daemon.Status{}); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	for k := range out {
		out[k] = nil
	}
	out["running"] = false
	out["home"] = home
	return out
}

func printStatus(io *IOStreams, st *daemon.Status) {
	w := io.Out
	fmt.Fprintf(w, "nerve daemon: running (pid %d, version %s, up %s)\n", st.PID, st.Version, time.Since(st.StartedAt).Round(time.Second))
	fmt.Fprintf(w, "home:     %s\n", st.Home)
	cfg := st.Config.File
	if cfg == "" {
		cfg = "(none; built-in defaults)"
	}
	reload := ""
	if st.Config.LastReload != "" && st.Config.LastReload != "ok" {
		reload = "  LAST RELOAD FAILED: " + st.Config.LastReload
	}
	fmt.Fprintf(w, "config:   %s (loaded %s)%s\n", cfg, st.Config.LoadedAt.Local().Format(time.TimeOnly), reload)
	fmt.Fprintf(w, "threads:  %d running\n", st.Threads)
	fmt.Fprintf(w, "turns:    %d active, capacity %d\n", len(st.ActiveTurns), st.Capacity)
	for _, a := range st.ActiveTurns {
		fmt.Fprintf(w, "  %s step %d  %s via %s  %s\n", a.Thread, a.Step, a.Role, a.Adapter, time.Since(a.StartedAt).Round(time.Second))
	}
	if len(st.Senses) > 0 {
		names := make([]string, 0, len(st.Senses))
		for _, s := range st.Senses {
			names = append(names, s.Name+" ("+s.Kind+", "+s.State+")")
		}
		fmt.Fprintf(w, "senses:   %s\n", strings.Join(names, ", "))
	}
}
