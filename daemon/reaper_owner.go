package daemon

import (
	"bytes"
	"os"
	"strconv"

	"github.com/nerve-agents/nerve/internal/procgroup"
	"github.com/nerve-agents/nerve/workflow"
)

// A process that escaped its turn and outlived its parent is the daemon's
// child, in a group that is no running turn's: only its environment still
// says where it comes from. Every turn's processes have NERVE_THREAD and
// NERVE_STEP (reflex sets them for the adapter), a helper's have
// procgroup.HelperEnv, and a process inherits them unless it clears them.
// One that clears them, or whose environment cannot be read (it made
// itself undumpable), is killed at the next sweep. One can also forge
// them to name another running turn, and then lives until that turn ends;
// it gains nothing by it: its answers are refused however it is named
// (peer.go), since it still descends from the daemon.

// ownerRuns reports whether the running process pid, a child of the
// daemon outside every running group, names in its environment a turn or
// a helper that still runs.
func (r *runner) ownerRuns(pid int) bool {
	env := environOf(pid)
	if id, ok := env[procgroup.HelperEnv]; ok && procgroup.HelperRunning(id) {
		return true
	}
	step, err := strconv.Atoi(env["NERVE_STEP"])
	return err == nil && r.turnRuns(env["NERVE_THREAD"], step)
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

// ownerVars are the variables ownerRuns reads.
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
