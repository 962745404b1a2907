package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
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

// turnSockets makes the turns' sockets in one private directory (0700),
// each under a random name (64 bits): a turn of a daemon started after a
// crash never gets the path a process of a dead one still knows, and a
// sandboxed turn, which sees only its own socket there, cannot guess
// another's. (A directory per turn would cost a mkdir and
// an rmdir more per turn, 40% of the socket's cost measured, for nothing
// the shared private directory does not give.)
type turnSockets struct {
	d       *Daemon
	base    string
	err     error        // the base could not be made: every turn's open fails with it
	handler http.Handler // turnRoutes, shared by every turn's socket
}

// turnSocketNameLen is a socket's name's length: 16 hex digits, ".sock".
const turnSocketNameLen = 16 + len(".sock")

// newTurnSockets sweeps what a daemon that crashed left under the base
// and makes it anew, empty, 0700.
func newTurnSockets(d *Daemon) *turnSockets {
	ts := &turnSockets{d: d, base: turnSocketBase(d.paths.Home), handler: d.turnRoutes()}
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
	if len(base)+1+turnSocketNameLen <= maxSocketPath {
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
	log     *slog.Logger // where refusals are logged
}

// turnSocket is one turn's open socket.
type turnSocket struct {
	path   string
	srv    *http.Server
	served chan struct{} // closed when Serve has returned
	once   sync.Once
}

// open starts serving scope's rights on a new socket.
func (ts *turnSockets) open(scope *turnScope) (*turnSocket, error) {
	if ts.err != nil {
		return nil, fmt.Errorf("turn socket: %w", ts.err)
	}
	ln, path, err := ts.listen()
	if err != nil {
		return nil, fmt.Errorf("turn socket: %w", err)
	}
	s := &turnSocket{path: path, served: make(chan struct{}),
		srv: &http.Server{Handler: ts.handler, ReadHeaderTimeout: 10 * time.Second,
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return withTurnScope(withConn(ctx, c), scope)
			},
			ErrorLog: slog.NewLogLogger(ts.d.log.Handler(), slog.LevelDebug)}}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ts.d.log.Warn("turn socket failed", "thread", scope.ref.String(), "step", scope.step, "err", err)
		}
	}()
	return s, nil
}

// listen makes a socket of a new random name, 0600. The directory is
// 0700, so it is private from its first instant; the mode is set besides
// (the umask is the process's, and other goroutines create files
// meanwhile: it is left alone).
func (ts *turnSockets) listen() (net.Listener, string, error) {
	for range 3 { // a name taken: by chance, or one a sweep missed
		var b [8]byte
		rand.Read(b[:])
		path := filepath.Join(ts.base, hex.EncodeToString(b[:])+".sock")
		if len(path) > maxSocketPath {
			return nil, "", fmt.Errorf("socket path %s is %d bytes, over the limit of %d", path, len(path), maxSocketPath)
		}
		ln, err := net.Listen("unix", path)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			return nil, "", err
		}
		return ln, path, nil
	}
	return nil, "", errors.New("no free socket name")
}

// close ends the socket: the listener, whose file goes with it, and every
// connection, even one in the middle of a request (a follow of events, a
// start). Safe to call more than once.
func (s *turnSocket) close() {
	s.once.Do(func() {
		s.srv.Close()
		<-s.served
		os.Remove(s.path) // gone already, unless Serve never took the listener
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
	s, err := ts.open(&turnScope{ref: ref, step: t.Step, workdir: t.Workdir, history: t.History, log: ts.d.log})
	if err != nil {
		return "", nil, err
	}
	return s.path, s.close, nil
}
