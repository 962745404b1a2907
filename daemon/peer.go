package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// An agent is kept from approving its own work: an answer to a human turn is
// refused when the process that sent it (the socket's peer, from
// SO_PEERCRED) descends from the daemon. The daemon starts no process but
// its turns' and its own helpers' (git), and it is the subreaper of what
// they start (reaper.go), so a process that detaches from its turn
// (setsid, a double fork) stays a descendant. A person answers from their
// own terminal, the console from its own process, neither of them the
// daemon's. Nor is a process a turn has had started by something outside
// the daemon (systemd-run --user, a tmux server already running, ssh
// localhost, at), and its answer passes for the person's: this guards
// against an agent answering for the person from its own process tree,
// not against every way one set on it could (README).

type connKey struct{}

// withConn keeps each request's connection in its context, so a handler
// can ask the kernel who is on the other end.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// errNotUnix: the request came on no unix socket (only tests serve the
// API otherwise), so there is no peer to ask the kernel about.
var errNotUnix = errors.New("not a unix socket connection")

// peerPID returns the pid of the process on the other end of r's unix
// socket connection.
func peerPID(r *http.Request) (int, error) {
	c, ok := r.Context().Value(connKey{}).(*net.UnixConn)
	if !ok {
		return 0, errNotUnix
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred *syscall.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// RecordGroup and ForgetGroup keep the running adapters' process groups.
func (r *runner) recordGroup(pgid int, turn string) {
	r.mu.Lock()
	r.groups[pgid] = turn
	r.mu.Unlock()
}

func (r *runner) forgetGroup(turn string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pgid, t := range r.groups {
		if t == turn {
			delete(r.groups, pgid)
		}
	}
}

// refuseFromTurn answers 403 and returns true when r was sent from a
// process the daemon's turns started.
func (d *Daemon) refuseFromTurn(w http.ResponseWriter, r *http.Request) bool {
	pid, err := peerPID(r)
	if errors.Is(err, errNotUnix) {
		return false
	}
	var msg string
	if err != nil {
		msg = "refused: cannot tell which process sent this answer: " + err.Error()
	} else {
		msg = d.runner.refusal(pid)
	}
	if msg == "" {
		return false
	}
	writeError(w, http.StatusForbidden, codeForbidden, msg, "answer from your own terminal, outside any agent's turn")
	return true
}

// handleMayAnswer tells the CLI, before it answers a remote's human turn
// with the person token stored here, whether it runs inside a turn: the
// remote cannot tell the person from an agent holding their token.
func (d *Daemon) handleMayAnswer(w http.ResponseWriter, r *http.Request) {
	if !d.refuseFromTurn(w, r) {
		writeJSON(w, http.StatusOK, struct{}{})
	}
}

// refusal says why an answer from process pid is refused, "" when it is
// not. The daemon's own process is no turn's (a test's client in it).
func (r *runner) refusal(pid int) string {
	self := os.Getpid()
	if pid == self {
		return ""
	}
	inside, known := descendsFrom(pid, self)
	switch {
	case !known:
		return fmt.Sprintf("refused: cannot tell where this answer comes from (pid %d has exited, or descends from too many processes)", pid)
	case !inside:
		return ""
	}
	if turn := r.turnOf(pid); turn != "" {
		return fmt.Sprintf("refused: this answer comes from inside a running turn (%s, pid %d); an agent never approves its own work", turn, pid)
	}
	return fmt.Sprintf("refused: this answer comes from a process a turn started (pid %d); an agent never approves its own work", pid)
}

// maxAncestry bounds the walk up from a process: no session of a person
// nests this deep.
const maxAncestry = 4096

// descendsFrom reports whether process pid descends from process anc, and
// whether that could be told at all. A process of the chain that exits
// meanwhile has its children handed on (to anc, when it is their
// subreaper), so a broken walk is walked again.
func descendsFrom(pid, anc int) (inside, known bool) {
	for attempt := 0; attempt < 3; attempt++ {
		p := pid
		for depth := 0; depth < maxAncestry; depth++ {
			pp, err := ppidOf(p)
			if err != nil {
				if p == pid {
					return false, false // the sender itself is gone
				}
				break
			}
			switch {
			case pp == anc:
				return true, true
			case pp <= 1: // init, or a parent outside this pid namespace (docker exec)
				return false, true
			}
			p = pp
		}
	}
	return false, false
}

// turnOf names the running turn process pid belongs to ("" when none, as
// for one that left its turn's group and outlived its parent): its process
// group is a turn's, or one of its ancestors leads one.
func (r *runner) turnOf(pid int) string {
	r.mu.Lock()
	groups := make(map[int]string, len(r.groups))
	for k, v := range r.groups {
		groups[k] = v
	}
	r.mu.Unlock()
	if len(groups) == 0 {
		return ""
	}
	if pgid, err := syscall.Getpgid(pid); err == nil {
		if t, ok := groups[pgid]; ok {
			return t
		}
	}
	for i := 0; i < 64 && pid > 1; i++ {
		if t, ok := groups[pid]; ok {
			return t
		}
		pid = parentPID(pid)
	}
	return ""
}

// parentPID reads field 4 of /proc/PID/stat; 0 when it cannot.
func parentPID(pid int) int {
	n, _ := ppidOf(pid)
	return n
}

// ppidOf is process pid's parent: 0 when it has none in this pid
// namespace, an error when pid is gone.
func ppidOf(pid int) (int, error) {
	fields, err := procstat.Fields(pid)
	if err != nil {
		return 0, err
	}
	if len(fields) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(fields[1])
}
