package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
)

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
	st, err := controlClient(f.Getenv).Status(ctx) // a turn's socket refuses it
	var nr *daemon.NotRunningError
	if errors.As(err, &nr) && !nr.Turn {
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
		// config's file and last_reload are null, not absent, when empty.
		type configJSON struct {
			File       *string   `json:"file"`
			LoadedAt   time.Time `json:"loaded_at"`
			LastReload *string   `json:"last_reload"`
		}
		return json.NewEncoder(f.IO.Out).Encode(struct {
			Running bool `json:"running"`
			*daemon.Status
			Config configJSON `json:"config"`
		}{true, st, configJSON{nullable(st.Config.File), st.Config.LoadedAt, nullable(st.Config.LastReload)}})
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
	printAdapters(w, st.Adapters)
	printSandbox(w, st.Sandbox)
}

// printSandbox says where turns run, and loudly when they run unwalled
// though the owner did not say so.
func printSandbox(w io.Writer, s daemon.SandboxStatus) {
	line := s.Effective
	if s.Effective == "bwrap" {
		line += " · network " + s.Network
	}
	if s.Mode != s.Effective {
		line += " (daemon.sandbox: " + s.Mode + ")"
	}
	fmt.Fprintf(w, "sandbox:  %s\n", line)
	if s.Warning != nil {
		fmt.Fprintf(w, "  WARNING: %s\n", *s.Warning)
	}
}

// printAdapters shows each adapter's spend today against its caps, and
// whether it is held back.
func printAdapters(w io.Writer, as []daemon.AdapterStatus) {
	if len(as) == 0 {
		return
	}
	fmt.Fprintf(w, "adapters: spent today (UTC %s)\n", as[0].Day)
	for _, a := range as {
		usd := fmt.Sprintf("$%.2f", a.SpentUSD)
		if a.DailyUSD != nil {
			usd += fmt.Sprintf(" of $%.2f", *a.DailyUSD)
		}
		tokens := fmt.Sprintf("%d tokens", a.SpentTokens)
		if a.DailyTokens != nil {
			tokens = fmt.Sprintf("%d of %d tokens", a.SpentTokens, *a.DailyTokens)
		}
		state := a.State
		switch a.State {
		case "capped":
			state = "CAPPED until 00:00 UTC"
		case "paused":
			state = fmt.Sprintf("PAUSED after %d rate limits in a row", a.RateLimited)
			if a.PausedUntil != nil {
				state += " until " + a.PausedUntil.Local().Format(time.TimeOnly)
			}
			if a.WaitingTurns > 0 {
				state += fmt.Sprintf(", %d turns waiting", a.WaitingTurns)
			}
		}
		fmt.Fprintf(w, "  %-14s %s, %s  %s\n", a.Name, usd, tokens, state)
	}
}
