package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"

	"github.com/nerve-agents/nerve/internal/procstat"
)

// An agent never approves its own work: an answer to a human turn is
// refused when the process that sent it (the socket's peer, from
// SO_PEERCRED) is inside a running turn's process group, or descends from
// a turn's adapter (an agent's tool that started its own group).

type connKey struct{}

// withConn keeps each request's connection in its context, so a handler
// can ask the kernel who is on the other end.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// peerPID returns the pid of the process on the other end of r's unix
// socket connection.
func peerPID(r *http.Request) (int, error) {
	c, ok := r.Context().Value(connKey{}).(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a unix socket connection")
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

// turnOf says which running turn the process pid belongs to ("" when
// none): its process group is a turn's, or one of its ancestors leads one.
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
	fields, err := procstat.Fields(pid)
	if err != nil || len(fields) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(fields[1])
	return n
}
