package daemon

import (
	"bytes"
	"os"
	"strconv"

	"github.com/nerve-agents/nerve/internal/procgroup"
	"github.com/nerve-agents/nerve/internal/procstat"
	"github.com/nerve-agents/nerve/workflow"
)

// A process that escaped its turn and outlived its parent is the daemon's
// child, in a group that is no running turn's: its environment says where
// it comes from. Every turn's processes have NERVE_THREAD and NERVE_STEP
// (reflex sets them for the adapter), a helper's have procgroup.HelperEnv,
// and a process inherits them unless it clears them. One that names a
// turn or helper still running is spared; one that names one that ended
// is killed. But a program that sets its process title (ssh's
// ControlPersist master, perl's $0) overwrites what /proc/PID/environ
// reads, and one that made itself undumpable cannot be read: such a
// process names nothing, and is spared while any turn or helper that was
// running when it started still runs (one of them started it), then
// killed. One can also forge its environment to name another running
// turn, and then lives until that turn ends; it gains nothing by it: its
// answers are refused however it is named (peer.go), since it still
// descends from the daemon.

// owner is what a stray's environment says of where it comes from.
type owner int

const (
	ownerUnknown owner = iota // names no turn or helper (cleared, overwritten, unreadable)
	ownerRunning              // names a turn or helper that still runs
	ownerEnded                // names a turn or helper that has ended
)

// ownerOf reads in the environment of the running process pid, a child
// of the daemon outside every running group, which turn or helper it
// comes from, and whether that still runs.
func (r *runner) ownerOf(pid int) owner {
	env := environOf(pid)
	if id, ok := env[procgroup.HelperEnv]; ok {
		if procgroup.HelperRunning(id) {
			return ownerRunning
		}
		return ownerEnded
	}
	step, err := strconv.Atoi(env["NERVE_STEP"])
	if err != nil || env["NERVE_THREAD"] == "" {
		return ownerUnknown
	}
	if r.turnRuns(env["NERVE_THREAD"], step) {
		return ownerRunning
	}
	return ownerEnded
}

// startedUnderRunning reports whether process pid started after some
// running turn's or helper's leader did: then one of them may have
// started it. Start times are compared in the kernel's ticks since boot.
func startedUnderRunning(pid int, leaders []int) bool {
	started, err := procstat.Started(pid)
	if err != nil {
		return false
	}
	for _, leader := range leaders {
		if t, err := procstat.Started(leader); err == nil && t <= started {
			return true
		}
	}
	return false
}

// turnRuns reports whether step step of thread ref (a NERVE_THREAD) runs
// here: the daemon keeps a local thread's turns under its id and a
// remote thread's under its ref (turn.go, remote_turn.go).
func (r *runner) turnRuns(ref string, step int) bool {
	parsed, err := workflow.ParseRef(ref)
	if err != nil || parsed.Thread == "" {
		return false
	}
	thread := ref
	if parsed.Remote == "" {
		thread = parsed.Thread
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.active[activeKey(thread, step)]
	return ok
}

// ownerVars are the variables ownerOf reads.
var ownerVars = []string{"NERVE_THREAD", "NERVE_STEP", procgroup.HelperEnv}

// environOf reads ownerVars from process pid's environment as it was
// given to it (/proc/PID/environ): the first of each name, as getenv
// finds it. It is empty when the file cannot be read.
func environOf(pid int) map[string]string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok {
			continue
		}
		for _, name := range ownerVars {
			if _, seen := out[name]; !seen && string(k) == name {
				out[name] = string(v)
			}
		}
	}
	return out
}
