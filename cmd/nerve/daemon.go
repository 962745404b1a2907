package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
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
	logger := slog.New(daemonLogHandler(f.IO.ErrOut, cfg.Log))
	flush, err := startTelemetry(cmd.Context(), "nerve-daemon", logger)
	if err != nil {
		return err
	}
	defer flush()
	// The first SIGTERM or Ctrl-C (cmd's context) starts a graceful
	// shutdown; a second one cuts the grace period short.
	hurry := make(chan struct{})
	// Done first: it installs the context's own handler (signalContext),
	// so each signal reaches both it and sigs.
	done := cmd.Context().Done()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-done
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
