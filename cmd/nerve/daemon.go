package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

func newCmdDaemon(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the nerve daemon in the foreground, or manage the background one",
		Long: `nerve daemon runs the daemon of this NERVE_HOME in the foreground.
It owns nerve.db, runs local threads and serves the CLI on nerve.sock.
SIGTERM stops it gracefully: no new turns, running ones get a grace period.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDaemon(f, cmd.Flags(), cmd)
		},
	}
	cmd.Flags().String("log-level", "", "debug, info, warn or error (overrides log.level)")
	cmd.Flags().String("name", "", "this agent's name (overrides agent.name)")
	cmd.AddCommand(newCmdDaemonStart(f), newCmdDaemonStop(f), newCmdDaemonStatus(f))
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
	logger := slog.New(daemonLogHandler(f.IO.ErrOut, cfg.Log))
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

// daemonLogHandler is the daemon's log format: charmbracelet/log as the
// handler behind the *slog.Logger every package takes, at nerve.yaml's
// level and in its format.
func daemonLogHandler(w io.Writer, c config.Log) slog.Handler {
	h := log.NewWithOptions(w, log.Options{ReportTimestamp: true, TimeFormat: time.RFC3339, Prefix: "nerved"})
	if lvl, err := log.ParseLevel(c.Level); err == nil {
		h.SetLevel(lvl)
	}
	switch c.Format {
	case "json":
		h.SetFormatter(log.JSONFormatter)
	case "logfmt":
		h.SetFormatter(log.LogfmtFormatter)
	}
	return h
}

// daemonState is the --json answer of daemon start and stop.
type daemonState struct {
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	Home    string `json:"home"`
	Log     string `json:"log,omitempty"`
	Already bool   `json:"already,omitempty"` // it was already so
}

func newCmdDaemonStart(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home := config.Home(f.Getenv)
			logPath := config.Paths{Home: home}.Log()
			c := daemon.NewClient(config.Paths{Home: home}.Socket())
			if st, serr := c.Status(cmd.Context()); serr == nil {
				if asJSON {
					return json.NewEncoder(f.IO.Out).Encode(daemonState{Running: true, PID: st.PID, Home: home, Log: logPath, Already: true})
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
			pid, err := daemon.Spawn(cmd.Context(), f.Executable, home, extra...)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(daemonState{Running: true, PID: pid, Home: home, Log: logPath})
			}
			fmt.Fprintf(f.IO.Out, "nerve daemon started (pid %d, NERVE_HOME=%s, log %s)\n", pid, home, logPath)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return cmd
}

func newCmdDaemonStop(f *Factory) *cobra.Command {
	var (
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the background daemon gracefully",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := config.Paths{Home: config.Home(f.Getenv)}
			c := daemon.NewClient(paths.Socket())
			pid, err := c.Shutdown(cmd.Context())
			var nr *daemon.NotRunningError
			if errors.As(err, &nr) {
				if asJSON {
					return json.NewEncoder(f.IO.Out).Encode(daemonState{Home: paths.Home, Already: true})
				}
				fmt.Fprintln(f.IO.Out, "nerve daemon is not running")
				return nil
			}
			if err != nil {
				return err
			}
			deadline := time.Now().Add(timeout)
			for time.Now().Before(deadline) {
				if syscall.Kill(pid, 0) != nil {
					if asJSON {
						return json.NewEncoder(f.IO.Out).Encode(daemonState{PID: pid, Home: paths.Home})
					}
					fmt.Fprintf(f.IO.Out, "nerve daemon stopped (pid %d)\n", pid)
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return fmt.Errorf("daemon (pid %d) still running after %s; see %s", pid, timeout, paths.Log())
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for the daemon to exit")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return cmd
}

func newCmdDaemonStatus(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's state: pid, config, active turns, capacity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths := config.Paths{Home: config.Home(f.Getenv)}
			st, err := daemon.NewClient(paths.Socket()).Status(cmd.Context())
			var nr *daemon.NotRunningError
			if errors.As(err, &nr) {
				if asJSON {
					_ = json.NewEncoder(f.IO.Out).Encode(map[string]any{"running": false, "home": paths.Home})
				} else {
					fmt.Fprintf(f.IO.Out, "nerve daemon: not running (NERVE_HOME=%s)\n", paths.Home)
				}
				return errSilentFail
			}
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(struct {
					Running bool `json:"running"`
					*daemon.Status
				}{true, st})
			}
			printStatus(f.IO, st)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
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
		for _, d := range a.Detections {
			fmt.Fprintf(w, "    detection %s\n", d)
		}
	}
	if len(st.Senses) > 0 {
		names := make([]string, 0, len(st.Senses))
		for _, s := range st.Senses {
			names = append(names, s.Name+" ("+s.Kind+", "+s.State+")")
		}
		fmt.Fprintf(w, "senses:   %s\n", strings.Join(names, ", "))
	}
}
