package procgroup

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// HelperEnv is set, in a helper's environment, to its registration:
// what leaves the helper's group (ssh's ControlPersist master detaching
// from git) still names the helper that started it, and is spared while
// that helper runs.
const HelperEnv = "NERVE_HELPER"

// helperWaitDelay bounds how long a helper's output may stay open once it
// has exited or been killed (only a process that left its group can hold
// it): Wait then closes the pipes and returns.
const helperWaitDelay = 2 * time.Second

// starting is held shared from a fork until its process is registered,
// and exclusively by Settled.
var starting sync.RWMutex

var (
	mu      sync.Mutex
	helpers = map[int]string{} // running helpers: process group → HelperEnv value
	nextID  int
)

// Start starts cmd and calls onStart (when set) with its pid, with no
// Settled in between: onStart registers the process where the sweep
// looks.
func Start(cmd *exec.Cmd, onStart func(pid int)) error {
	starting.RLock()
	defer starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if onStart != nil {
		onStart(cmd.Process.Pid)
	}
	return nil
}

// Settled runs fn while no process is between its fork and its
// registration: a process fn finds has been registered, if it is one the
// daemon started.
func Settled(fn func()) {
	starting.Lock()
	defer starting.Unlock()
	fn()
}

// Command is exec.CommandContext for a helper: it runs in a process group
// of its own, which the end of ctx kills whole (git's own children,
// git-remote-https, ssh and index-pack, with it). Run it with Run.
func Command(ctx context.Context, name string, arg ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, arg...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = helperWaitDelay
	return cmd
}

// Run runs a helper made by Command to its end, its group registered as
// a running helper's from its fork until Wait has returned. What the
// group leaves behind is then the sweep's to kill and reap.
func Run(cmd *exec.Cmd) error {
	mu.Lock()
	nextID++
	id := strconv.Itoa(nextID)
	mu.Unlock()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, HelperEnv+"="+id)
	err := Start(cmd, func(pid int) {
		mu.Lock()
		helpers[pid] = id
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer func() {
		mu.Lock()
		// Once reaped, the pid may lead a new helper's group already.
		if helpers[cmd.Process.Pid] == id {
			delete(helpers, cmd.Process.Pid)
		}
		mu.Unlock()
	}()
	return cmd.Wait()
}

// HelperGroup reports whether pgid is a running helper's process group.
func HelperGroup(pgid int) bool {
	mu.Lock()
	defer mu.Unlock()
	_, ok := helpers[pgid]
	return ok
}

// HelperGroups lists the running helpers' process groups (each led by
// its helper, whose pid it is).
func HelperGroups() []int {
	mu.Lock()
	defer mu.Unlock()
	out := make([]int, 0, len(helpers))
	for pgid := range helpers {
		out = append(out, pgid)
	}
	return out
}

// HelperRunning reports whether id, a HelperEnv value, names a running
// helper.
func HelperRunning(id string) bool {
	mu.Lock()
	defer mu.Unlock()
	for _, h := range helpers {
		if h == id {
			return true
		}
	}
	return false
}

// killGroup kills the process group led by pid; an empty group is no
// error.
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
