package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/daemon"
)

// controlClient is a client of the turn's socket inside a turn
// (NERVE_TURN_SOCKET: that turn's rights only, and the one way to nerve
// inside a sandbox, where NERVE_HOME is not), else of this NERVE_HOME's
// daemon.
func controlClient(getenv func(string) string) *daemon.Client {
	if s := getenv(daemon.TurnSocketEnv); s != "" {
		return daemon.NewTurnClient(s)
	}
	return daemon.NewClient(config.Paths{Home: config.Home(getenv)}.Socket())
}

// daemonClient returns a client of this NERVE_HOME's daemon, starting the
// daemon in the background (and saying so in one line) when none answers,
// unless NERVE_NO_AUTOSTART=1. Inside a turn it is the turn's socket,
// which nothing starts: it answers while its turn runs.
func (f *Factory) daemonClient(ctx context.Context) (*daemon.Client, error) {
	if c := controlClient(f.Getenv); c.IsTurn() {
		if err := c.Ping(ctx); err != nil {
			return nil, err
		}
		return c, nil
	}
	home := config.Home(f.Getenv)
	c := daemon.NewClient(config.Paths{Home: home}.Socket())
	err := c.Ping(ctx)
	if err == nil {
		return c, nil
	}
	var nr *daemon.NotRunningError
	if !errors.As(err, &nr) {
		return nil, err
	}
	if f.Getenv("NERVE_NO_AUTOSTART") == "1" {
		return nil, &daemonNotRunning{home: home}
	}
	args := []string{}
	if f.configFile != "" {
		args = append(args, "--config", f.configFile)
	}
	pid, err := daemon.Spawn(ctx, f.Executable, home, args...)
	if err != nil {
		var se *daemon.StartError
		if errors.As(err, &se) {
			return nil, err // the daemon's own message, hint and exit code
		}
		return nil, fmt.Errorf("start the nerve daemon: %w", err)
	}
	fmt.Fprintf(f.IO.ErrOut, "nerve: started the daemon in the background (pid %d, NERVE_HOME=%s)\n", pid, home)
	return c, nil
}

type daemonNotRunning struct{ home string }

func (e *daemonNotRunning) Error() string {
	return fmt.Sprintf("no nerve daemon is running for %s and NERVE_NO_AUTOSTART=1", e.home)
}
func (e *daemonNotRunning) ExitCode() int { return exitFailed }
func (e *daemonNotRunning) Hint() string {
	return "start one with 'nerve daemon start' or unset NERVE_NO_AUTOSTART"
}

// refuseInsideTurn refuses, as the daemon refuses a local answer, an
// answer to a remote's human turn sent from inside a turn of this
// NERVE_HOME's daemon: it goes with the person token stored here, and the
// remote cannot tell the person from an agent holding it. The daemon
// judges by the caller's process (SO_PEERCRED); none is started to ask.
// A turn's processes also have NERVE_THREAD, a person's terminal not:
// with it set the answer is refused even when no daemon answers, as an
// agent reaches none by pointing NERVE_HOME elsewhere. Both are guards
// only (an agent may unset NERVE_THREAD too).
func (f *Factory) refuseInsideTurn(ctx context.Context) error {
	c := controlClient(f.Getenv)
	err := c.MayAnswer(ctx)
	var nr *daemon.NotRunningError
	var ae *daemon.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusForbidden:
		return err // the daemon's refusal names the turn and the process
	case f.Getenv("NERVE_THREAD") != "":
		return &failedError{
			msg:  fmt.Sprintf("refused: this answer comes from inside a turn (NERVE_THREAD=%s); an agent never approves its own work", f.Getenv("NERVE_THREAD")),
			hint: "answer from your own terminal, outside any agent's turn",
		}
	case errors.As(err, &nr):
		return nil // no daemon, no turn of it
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return &failedError{msg: "the running daemon is older than this nerve and cannot tell whether this answer comes from inside a turn",
			hint: "restart it ('nerve daemon stop'; the next command starts this version), then answer again"}
	}
	return err
}
