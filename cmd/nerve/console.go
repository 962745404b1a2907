package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/console"
	"github.com/nerve-agents/nerve/daemon"
)

// consoleOptions are the inputs of `nerve console`.
type consoleOptions struct {
	Addr string
}

func newCmdConsole(f *Factory, runF func(*consoleOptions) error) *cobra.Command {
	opts := &consoleOptions{}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console of this machine's daemon on 127.0.0.1",
		Long: `Serve the web console of the local daemon: threads, live thread pages,
workflows, the running turns, usage and the inbox of human turns, answered
through a form. It listens on loopback only and prints a sign-in link that
works once: its page's Sign in button signs the browser in with a session
cookie (opening the link, as a link preview does, spends nothing).
Ctrl-C stops it.`,
		Example: `  nerve console
  nerve console --addr 127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return consoleRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Addr, "addr", "127.0.0.1:7780", "where to listen: a loopback host and a port (0 picks a free one)")
	return cmd
}

// checkLoopbackAddr refuses an address other machines could reach: the
// console of a daemon is for the person at this machine.
func checkLoopbackAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return usageErrorf("write it as HOST:PORT, such as 127.0.0.1:7780", "--addr %q is not HOST:PORT", addr)
	}
	if err := checkPort(addr, port); err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErrorf("use 127.0.0.1 or ::1; share a team's console through Khala (nerve khala serve)",
			"--addr %s: the local console listens on loopback only", addr)
	}
	return nil
}

// checkPort refuses a port no socket can have (a number past 65535, a
// name that is no service), as a usage error before anything starts.
func checkPort(addr, port string) error {
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageErrorf("give a port from 1 to 65535, or 0 for any free one", "--addr %q: %v", addr, err)
	}
	return nil
}

func consoleRun(ctx context.Context, f *Factory, opts *consoleOptions) error {
	if err := checkLoopbackAddr(opts.Addr); err != nil {
		return err
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	// The port first: a port another program holds starts no daemon.
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return &failedError{msg: fmt.Sprintf("listen on %s: %v", opts.Addr, errors.Unwrap(err)), hint: "another program holds that port; pick another with --addr"}
	}
	defer ln.Close()
	client, err := f.daemonClient(ctx)
	if err != nil {
		return err
	}
	c := console.New(console.Options{
		Source: &consoleDaemon{client: client, agent: cfg.Agent.Name, dirs: cfg.Workflows},
		Title:  cfg.Agent.Name,
		// Only the one-time link signs in: no token of the daemon's
		// exists for a browser to hold.
		SignInHelp: "Run 'nerve console' again for a fresh sign-in link.",
		Logger:     slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(f.IO.Out, "nerve console for %s: %s%s\n", cfg.Agent.Name, base, c.OneTimeSignIn(daemon.PersonName()))
	fmt.Fprintf(f.IO.ErrOut, "the link signs in one browser, once; Ctrl-C stops the console\n")
	hs := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve the console: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		hs.Close() // live pages hold streams open
	}
	return nil
}
