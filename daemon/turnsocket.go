package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/workflow"
)

// Each turn reaches nerve through a socket of its own (DESIGN.md, "Sandbox
// and authorization"): the daemon opens it when the turn starts, serves on
// it that turn's rights and nothing else (turnsocket_api.go), and closes
// and removes it when the turn ends, cutting off every connection still
// open, so a process that outlives its turn (setsid, a double fork) holds
// nothing. The socket is the capability: inside the sandbox it is the one
// way to nerve (NERVE_HOME and nerve.sock are not there); outside it the
// CLI uses it too (NERVE_TURN_SOCKET), so a turn's rights are the same in
// every posture.

// TurnSocketEnv names the variable that holds a turn's socket.
const TurnSocketEnv = "NERVE_TURN_SOCKET"

// turnSocketName is the socket's name in its turn's directory.
const turnSocketName = "sock"

// turnSockets makes the turns' sockets, each in a directory of its own
// (0700, a random name: a turn of a daemon started after a crash never
// gets the path a process of a dead one still knows) under base.
type turnSockets struct {
	d    *Daemon
	base string
	err  error // the base could not be made: every turn's open fails with it
}

// newTurnSockets sweeps what a daemon that crashed left under the base
// and makes it anew, empty, 0700.
func newTurnSockets(d *Daemon) *turnSockets {
	ts := &turnSockets{d: d, base: turnSocketBase(d.paths.Home)}
	ts.err = sweepDir(ts.base)
	if ts.err != nil {
		d.log.Warn("cannot make the turns' socket directory; turns will fail", "dir", ts.base, "err", ts.err)
	}
	return ts
}

// turnSocketBase is NERVE_HOME/turns, or, when a socket there would not
// fit sun_path (a long NERVE_HOME that nerve.sock still fits), a
// directory of this user's and NERVE_HOME's in the temporary directory.
func turnSocketBase(home string) string {
	base := filepath.Join(home, "turns")
	// A per-turn directory's name is at most 10 digits (os.MkdirTemp).
	if len(base)+1+10+1+len(turnSocketName) <= maxSocketPath {
		return base
	}
	sum := sha256.Sum256([]byte(home))
	return filepath.Join(os.TempDir(), fmt.Sprintf("nerve-%d-%x", os.Getuid(), sum[:6]))
}

// sweepDir removes dir and whatever is in it, then makes it empty and
// private. A symbolic link there is removed, not followed; a directory
// someone else made in a shared temporary directory fails the Mkdir.
func sweepDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// turnScope is what a turn's socket lets it reach.
type turnScope struct {
	// ref is the turn's thread (Remote set for a remote turn) and step
	// its step.
	ref  workflow.Ref
	step int
	// workdir is where the turn works: a child it starts works there or
	// under it, and so must a definition file or a repository it names.
	// Empty: a child gets its own scratch directory and may name neither.
	workdir string
	// history is what the turn's snapshot holds: a remote turn's own
	// thread's messages, which this daemon keeps no record of.
	history []workflow.Message
}

// turnSocket is one turn's open socket.
type turnSocket struct {
	dir, path string
	srv       *http.Server
	served    chan struct{} // closed when Serve has returned
	once      sync.Once
}

// open starts serving scope's rights on a new socket.
func (ts *turnSockets) open(scope *turnScope) (*turnSocket, error) {
	if ts.err != nil {
		return nil, fmt.Errorf("turn socket: %w", ts.err)
	}
	dir, err := os.MkdirTemp(ts.base, "")
	if err != nil {
		return nil, fmt.Errorf("turn socket: %w", err)
	}
	path := filepath.Join(dir, turnSocketName)
	if len(path) > maxSocketPath {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("turn socket path %s is %d bytes, over the limit of %d", path, len(path), maxSocketPath)
	}
	// The directory is 0700, so the socket is private from its first
	// instant; it is made 0600 besides. (The umask is the process's, and
	// other goroutines create files meanwhile: it is left alone.)
	ln, err := net.Listen("unix", path)
	if err == nil {
		err = os.Chmod(path, 0o600)
		if err != nil {
			ln.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("turn socket: %w", err)
	}
	s := &turnSocket{dir: dir, path: path, served: make(chan struct{}),
		srv: &http.Server{Handler: ts.d.turnRoutes(scope), ReadHeaderTimeout: 10 * time.Second, ConnContext: withConn,
			ErrorLog: slog.NewLogLogger(ts.d.log.Handler(), slog.LevelDebug)}}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ts.d.log.Warn("turn socket failed", "thread", scope.ref.String(), "step", scope.step, "err", err)
		}
	}()
	return s, nil
}

// close ends the socket: the listener and every connection, even one in
// the middle of a request (a follow of events, a start), then its
// directory. Safe to call more than once.
func (s *turnSocket) close() {
	s.once.Do(func() {
		s.srv.Close()
		<-s.served
		os.RemoveAll(s.dir)
	})
}

// service is the turn socket as a per-turn service of the executor: the
// socket is bound into the sandbox at its own path, so NERVE_TURN_SOCKET
// names it in every posture (the executor sets the variable with or
// without a sandbox, and binds only within one).
func (ts *turnSockets) service(_ context.Context, t *reflex.Turn, _ string) (sandbox.Extra, func(), error) {
	path, end, err := ts.forTurn(t)
	if err != nil {
		return sandbox.Extra{}, nil, err
	}
	return sandbox.Extra{Binds: []sandbox.Bind{{Src: path, Dst: path}}, Env: []string{TurnSocketEnv + "=" + path}}, end, nil
}

// forTurn opens the socket of turn t (t.Workdir where it works) and
// returns its path and the func that closes it.
func (ts *turnSockets) forTurn(t *reflex.Turn) (string, func(), error) {
	ref, err := workflow.ParseRef(t.Ref)
	if err != nil || ref.Thread == "" {
		return "", nil, fmt.Errorf("turn socket: the turn's thread %q is no thread ref", t.Ref)
	}
	s, err := ts.open(&turnScope{ref: ref, step: t.Step, workdir: t.Workdir, history: t.History})
	if err != nil {
		return "", nil, err
	}
	return s.path, s.close, nil
}
