package daemon

import (
	"maps"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nerve-agents/nerve/internal/procgroup"
	"github.com/nerve-agents/nerve/internal/procstat"
)

// The daemon is the subreaper of everything it starts: a process that
// left its turn's group and session (setsid, a double fork) is handed to
// the daemon, not to init, when its parent exits. So every process a turn
// started stays a descendant of the daemon, unless it was started by
// something that is not (peer.go), and what outlives its turn is the
// daemon's child. The daemon sweeps its children: it spares the groups it
// started and that still run (a turn's, a helper's such as git's, each
// registered through procgroup) and its own group, and reaps every other
// child that has exited; one still running is told apart by the turn
// its environment names (reaper_owner.go): spared while that turn runs,
// killed and reaped once it has ended or when it names none. It sweeps
// when a turn ends, once more shortly after (a process handed over
// late), every sweepPeriod (a helper's leftovers, an escapee whose turn
// ended while it still had a parent) and at shutdown.

const (
	// sweepFor bounds one sweep: a process that will not die (stuck in
	// the kernel) is left for the next one.
	sweepFor = 3 * time.Second
	// sweepEvery spaces sweeps out: a sweep costs about a tenth of a
	// short turn's own work, so a burst of turns ending is swept after
	// once per interval rather than once per turn.
	sweepEvery = 100 * time.Millisecond
	// lateSweepAfter: a turn's group is killed when its turn ends, and
	// a member dying after the first sweep hands its escaped children
	// over only then.
	lateSweepAfter = time.Second
)

// sweepPeriod is the longest the daemon goes without a sweep: a sweep
// costs some 80µs. A variable so tests can shorten it.
var sweepPeriod = 5 * time.Second

// becomeSubreaper makes orphaned descendants the daemon's children.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// kickSweep asks for a sweep soon, and another lateSweepAfter later,
// without waiting for them; kicks while one is pending make one sweep.
func (r *runner) kickSweep() {
	select {
	case r.sweeps <- struct{}{}:
	default:
	}
}

// startSweeps sweeps in the background every sweepPeriod and when
// kicked, at most once per sweepEvery, until the returned stop, which
// sweeps once more before it returns.
func (r *runner) startSweeps() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		period := time.NewTicker(sweepPeriod)
		defer period.Stop()
		var late <-chan time.Time
		for {
			select {
			case <-r.sweeps:
				late = time.After(lateSweepAfter)
			case <-late:
				late = nil
			case <-period.C:
			case <-quit:
				return
			}
			r.sweep()
			pause := time.NewTimer(sweepEvery)
			select {
			case <-pause.C:
			case <-quit:
				pause.Stop()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		r.sweep()
	}
}

// sweep kills the processes that outlived their turn and reaps them, and
// the ones that exited on their own. Killing one hands its children to
// the daemon, so it goes again until none is left.
func (r *runner) sweep() {
	deadline := time.Now().Add(sweepFor)
	own := syscall.Getpgrp()
	for time.Now().Before(deadline) {
		var found []stray
		// Settled: a process the daemon forked just now is registered
		// before its children are read, so it is never taken for a stray.
		procgroup.Settled(func() { found = r.strays(own) })
		doomed, spared := r.judge(found)
		if len(doomed) == 0 {
			return
		}
		pids := make([]int, len(doomed))
		for i, s := range doomed {
			pids[i] = s.pid
			if s.zombie {
				continue
			}
			r.d.log.Warn("killing a process that outlived its turn", "pid", s.pid, "command", commandOf(s.pid))
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
			if !spared[s.pgid] {
				_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
			}
		}
		reap(pids, deadline)
	}
}

// stray is a child of the daemon that belongs to no running group.
type stray struct {
	pid, pgid int
	zombie    bool
}

// strays lists the daemon's children outside its own process group own
// and outside every running turn's and helper's group, and the ones of a
// running group that have exited, but its leader. It never names a child
// os/exec waits for (a running group's leader; nothing the daemon starts
// runs in its own group), so reaping a stray takes no exit status from
// os/exec.
func (r *runner) strays(own int) []stray {
	r.mu.Lock()
	groups := maps.Clone(r.groups)
	r.mu.Unlock()
	var out []stray
	for _, pid := range children() {
		f, err := procstat.Fields(pid)
		if err != nil || len(f) < 3 {
			continue
		}
		pgid, err := strconv.Atoi(f[2])
		if err != nil || pgid <= 1 || pgid == own {
			continue
		}
		zombie := f[0] == "Z"
		_, turn := groups[pgid]
		if (turn || procgroup.HelperGroup(pgid)) && (!zombie || pid == pgid) {
			continue
		}
		out = append(out, stray{pid: pid, pgid: pgid, zombie: zombie})
	}
	return out
}

// judge splits strays into the ones to kill or reap (the exited, and the
// running that belong to nothing running) and the process groups of the
// ones spared, which are not killed whole.
func (r *runner) judge(found []stray) (doomed []stray, spared map[int]bool) {
	var leaders []int // the running turns' and helpers' leaders, read once
	for _, s := range found {
		keep := false
		if !s.zombie {
			switch r.ownerOf(s.pid) {
			case ownerRunning:
				keep = true
			case ownerUnknown:
				if leaders == nil {
					leaders = r.runningLeaders()
				}
				keep = startedUnderRunning(s.pid, leaders)
			}
		}
		if !keep {
			doomed = append(doomed, s)
			continue
		}
		if spared == nil {
			spared = map[int]bool{}
		}
		spared[s.pgid] = true
	}
	return doomed, spared
}

// runningLeaders lists the leaders of the running turns' and helpers'
// process groups (a leader's pid is its group's id).
func (r *runner) runningLeaders() []int {
	leaders := procgroup.HelperGroups()
	r.mu.Lock()
	for pgid := range r.groups {
		leaders = append(leaders, pgid)
	}
	r.mu.Unlock()
	return leaders
}
