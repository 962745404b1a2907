package adapter

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A turn's process is watched from the goroutine that runs the turn, with
// one poll(2) over its stdout, stderr and stdin pipes, its pidfd and a
// descriptor that cancellation writes to. Reading the pipes in goroutines
// through Go's netpoller, with os/exec's goroutine watching the context,
// cost each turn 0.3-0.6 ms of wake-ups passed between threads on a
// two-core VM, as much as the rest of the engine.

// pipes are a child's stdio: the ends nerve keeps (raw descriptors, -1
// once closed) and the ends the child gets.
type pipes struct {
	stdout, stderr, stdin     int
	childOut, childErr, child *os.File // child: its stdin, nil for /dev/null
}

// newPipes makes the pipes for a child; stdin only when it has input.
// Every descriptor is close-on-exec, so another turn's child inherits none.
func newPipes(withStdin bool) (*pipes, error) {
	p := &pipes{stdout: -1, stderr: -1, stdin: -1}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	p.stdout, p.childOut = fds[0], os.NewFile(uintptr(fds[1]), "stdout")
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		p.close()
		return nil, err
	}
	p.stderr, p.childErr = fds[0], os.NewFile(uintptr(fds[1]), "stderr")
	if withStdin {
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			p.close()
			return nil, err
		}
		p.child, p.stdin = os.NewFile(uintptr(fds[0]), "stdin"), fds[1]
		// Written only when poll says there is room; never blocks the turn.
		if err := unix.SetNonblock(p.stdin, true); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// closeChildEnds drops nerve's copies of the child's ends once it has
// its own: holding them would keep the pipes open after it exits.
func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.childOut, p.childErr, p.child} {
		if f != nil {
			f.Close()
		}
	}
	p.childOut, p.childErr, p.child = nil, nil, nil
}

func (p *pipes) close() {
	p.closeChildEnds()
	for _, fd := range []*int{&p.stdout, &p.stderr, &p.stdin} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// watch follows one started child to its end.
type watch struct {
	pid, pidfd int // pidfd -1: the kernel gave none (polled with waitid)
	pipes      *pipes
	input      []byte // what stdin has left to write
	out, errs  *lineSplitter
	deadline   time.Time // the turn's timeout; zero for none

	killed bool  // nerve ended the group: timeout or cancel
	cause  error // why, when killed
}

// watchBuffers are the 64 KiB read buffers, reused across turns.
var watchBuffers = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// run reads the child's output until the leader has exited and its pipes
// are closed, feeding stdin meanwhile. Cancelling ctx or passing the
// deadline sends the group SIGTERM, and SIGKILL after killGrace; when the
// leader exits the rest of its group is killed, and pipes still held open
// (by a process that left the group) are closed after pipeDrain.
func (w *watch) run(ctx context.Context) error {
	buf := watchBuffers.Get().(*[64 << 10]byte)
	defer watchBuffers.Put(buf)
	wake, stop, err := wakeOnDone(ctx)
	if err != nil {
		return err
	}
	defer stop()

	exited := false
	var graceEnd, drainEnd time.Time
	fds := make([]unix.PollFd, 0, 5)
	for !exited || w.pipes.stdout >= 0 || w.pipes.stderr >= 0 {
		now := time.Now()
		if !w.killed && !exited && !w.deadline.IsZero() && !now.Before(w.deadline) {
			w.terminate(ErrTimeout)
			graceEnd = now.Add(killGrace)
		}
		if w.killed && !exited && !graceEnd.IsZero() && !now.Before(graceEnd) {
			_ = signalGroup(w.pid, syscall.SIGKILL)
			graceEnd = time.Time{}
		}
		if exited && !now.Before(drainEnd) {
			w.closeOutput()
			break
		}
		if !exited && w.pidfd < 0 && w.leaderExited() {
			exited, drainEnd = true, now.Add(pipeDrain)
			_ = signalGroup(w.pid, syscall.SIGKILL)
			continue
		}

		fds = fds[:0]
		for _, fd := range []int{w.pipes.stdout, w.pipes.stderr} {
			if fd >= 0 {
				fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			}
		}
		if w.pipes.stdin >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(w.pipes.stdin), Events: unix.POLLOUT})
		}
		if !exited && w.pidfd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(w.pidfd), Events: unix.POLLIN})
		}
		if !w.killed && wake >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(wake), Events: unix.POLLIN})
		}
		timeout := w.pollTimeout(now, exited, graceEnd, drainEnd)
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for _, f := range fds {
			if f.Revents == 0 {
				continue
			}
			switch int(f.Fd) {
			case w.pipes.stdout:
				w.read(&w.pipes.stdout, w.out, buf[:])
			case w.pipes.stderr:
				w.read(&w.pipes.stderr, w.errs, buf[:])
			case w.pipes.stdin:
				w.write()
			case w.pidfd:
				exited, drainEnd = true, time.Now().Add(pipeDrain)
				// The leader is gone; take the rest of its group with it.
				_ = signalGroup(w.pid, syscall.SIGKILL)
			case wake:
				w.terminate(context.Cause(ctx))
				graceEnd = time.Now().Add(killGrace)
			}
		}
	}
	w.closeInput()
	return nil
}

// pollTimeout is how long poll may wait (ms; -1 for ever): until the next
// deadline that applies.
func (w *watch) pollTimeout(now time.Time, exited bool, graceEnd, drainEnd time.Time) int {
	var next time.Time
	switch {
	case exited:
		next = drainEnd
	case w.killed:
		next = graceEnd
	default:
		next = w.deadline
	}
	if w.pidfd < 0 && !exited {
		// No pidfd to wake on the leader's exit: look every 10 ms.
		if next.IsZero() || next.After(now.Add(10*time.Millisecond)) {
			next = now.Add(10 * time.Millisecond)
		}
	}
	if next.IsZero() {
		return -1
	}
	return int(max(0, (next.Sub(now)+time.Millisecond-1)/time.Millisecond))
}

// terminate starts ending the group: SIGTERM now, SIGKILL after the grace.
func (w *watch) terminate(cause error) {
	w.killed, w.cause = true, cause
	_ = signalGroup(w.pid, syscall.SIGTERM)
}

// read takes what a pipe holds into its lines; at EOF or on an error it
// closes the pipe and ends its last line.
func (w *watch) read(fd *int, lines *lineSplitter, buf []byte) {
	n, err := unix.Read(*fd, buf)
	if n > 0 {
		lines.write(buf[:n])
		return
	}
	if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
		return
	}
	closePipe(fd, lines)
}

// closePipe closes an output pipe that is still open and ends its last
// line.
func closePipe(fd *int, lines *lineSplitter) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
		lines.close()
	}
}

// write gives stdin what fits; a child that exits or closes its stdin
// without reading it all ends the writing (its exit status says what it
// made of that).
func (w *watch) write() {
	for len(w.input) > 0 {
		n, err := unix.Write(w.pipes.stdin, w.input)
		if n > 0 {
			w.input = w.input[n:]
			continue
		}
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return
		}
		break
	}
	w.closeInput()
}

func (w *watch) closeInput() {
	if w.pipes.stdin >= 0 {
		unix.Close(w.pipes.stdin)
		w.pipes.stdin = -1
	}
}

// closeOutput gives up on pipes a process outside the group still holds.
func (w *watch) closeOutput() {
	closePipe(&w.pipes.stdout, w.out)
	closePipe(&w.pipes.stderr, w.errs)
}

// leaderExited asks the kernel, without reaping it, whether the leader
// has exited: for kernels that gave no pidfd.
func (w *watch) leaderExited() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, w.pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// wakeOnDone returns a descriptor that becomes readable when ctx is done
// (-1 when ctx can never be), and a stop that releases it; stop returns
// only when the write can no longer happen, so the descriptor's number is
// not reused under it.
func wakeOnDone(ctx context.Context) (int, func(), error) {
	if ctx.Done() == nil {
		return -1, func() {}, nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, nil, err
	}
	fired := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(fired)
		one := [8]byte{1}
		_, _ = unix.Write(fd, one[:])
	})
	return fd, func() {
		if !stopAfter() {
			<-fired
		}
		unix.Close(fd)
	}, nil
}
