package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// A cloud thread's worktree goes from this machine when its thread ends
// or moves to another machine (DESIGN.md, Workspaces). Which worktrees
// this daemon holds is read from their own records under
// NERVE_HOME/worktrees (workspace.Manager.CloudKeys), so a restart forgets
// none. Each is checked against its remote at start, soon after each turn
// of it here, and then again after a pause that doubles while nothing
// changes; it is removed when its thread ended (or its remote no longer
// knows it, or is no longer configured) or when another agent took the
// thread's latest turn. A turn's own worktree is never removed under it.

const (
	// treeCheckFirst is how long after a turn here its worktree is first
	// checked: the thread's next turn is usually claimed by then.
	treeCheckFirst = 2 * time.Second
	// treeCheckMax bounds the pause between checks of a worktree whose
	// thread waits (for a person, for a free agent).
	treeCheckMax = 5 * time.Minute
	// treeCheckTimeout bounds one check's requests to its remote.
	treeCheckTimeout = 20 * time.Second
)

// cloudTrees is what the daemon knows in memory about the cloud worktrees
// it holds: which are in use by a turn, which are being removed, and when
// each is next checked.
type cloudTrees struct {
	mu       sync.Mutex
	removed  *sync.Cond // broadcast when a removal is over
	busy     map[string]int
	removing map[string]bool
	due      map[string]time.Time
	pause    map[string]time.Duration
	me       map[string]string // a remote's name for this agent
	kick     chan struct{}
}

func newCloudTrees() *cloudTrees {
	ct := &cloudTrees{busy: map[string]int{}, removing: map[string]bool{}, due: map[string]time.Time{},
		pause: map[string]time.Duration{}, me: map[string]string{}, kick: make(chan struct{}, 1)}
	ct.removed = sync.NewCond(&ct.mu)
	return ct
}

// begin marks key's worktree in use by a turn, after any removal of it
// under way: the turn then makes it anew.
func (ct *cloudTrees) begin(key string) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for ct.removing[key] {
		ct.removed.Wait()
	}
	ct.busy[key]++
	delete(ct.due, key)
}

// end marks a turn of key over: its worktree is checked soon.
func (ct *cloudTrees) end(key string) {
	ct.mu.Lock()
	if ct.busy[key]--; ct.busy[key] <= 0 {
		delete(ct.busy, key)
		ct.due[key] = time.Now().Add(treeCheckFirst)
		ct.pause[key] = treeCheckFirst
	}
	ct.mu.Unlock()
	select {
	case ct.kick <- struct{}{}:
	default:
	}
}

// known adds keys found on disk, due for a check now.
func (ct *cloudTrees) known(keys []string) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	now := time.Now()
	for _, k := range keys {
		if ct.busy[k] == 0 {
			ct.due[k], ct.pause[k] = now, treeCheckFirst
		}
	}
}

// dueNow returns the keys due for a check, and when the next one is due.
func (ct *cloudTrees) dueNow(now time.Time) (keys []string, next time.Time) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for k, at := range ct.due {
		switch {
		case !at.After(now):
			keys = append(keys, k)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	return keys, next
}

// later puts key's next check off by a pause twice the last one.
func (ct *cloudTrees) later(key string) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if _, ok := ct.due[key]; !ok {
		return // a turn of it began meanwhile
	}
	p := min(max(2*ct.pause[key], treeCheckFirst), treeCheckMax)
	ct.pause[key], ct.due[key] = p, time.Now().Add(p)
}

// remove runs rm for key's worktree unless a turn uses it; key is then
// forgotten. It reports whether rm ran.
func (ct *cloudTrees) remove(key string, rm func(string)) bool {
	ct.mu.Lock()
	if ct.busy[key] > 0 || ct.removing[key] {
		ct.mu.Unlock()
		return false
	}
	ct.removing[key] = true
	delete(ct.due, key)
	delete(ct.pause, key)
	ct.mu.Unlock()
	rm(key)
	ct.mu.Lock()
	delete(ct.removing, key)
	ct.removed.Broadcast()
	ct.mu.Unlock()
	return true
}

// startTreeChecks checks the cloud worktrees on disk at once, then each
// when due, until the returned stop.
func (r *runner) startTreeChecks() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.trees.known(r.ws.CloudKeys())
	go func() {
		defer close(done)
		for {
			keys, next := r.trees.dueNow(time.Now())
			for _, k := range keys {
				r.checkTree(ctx, k)
			}
			wait := time.Minute
			if !next.IsZero() {
				wait = min(max(time.Until(next), 10*time.Millisecond), wait)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-r.trees.kick:
			case <-t.C:
			}
			t.Stop()
		}
	}()
	return func() { cancel(); <-done }
}

// checkTree removes key's worktree when its thread is done with this
// machine, and puts its next check off when not (or when the remote
// cannot say).
func (r *runner) checkTree(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(ctx, treeCheckTimeout)
	defer cancel()
	why, err := r.treeGone(ctx, key)
	switch {
	case ctx.Err() != nil && why == "":
		r.trees.later(key)
	case err != nil:
		r.d.log.Debug("check a cloud thread's worktree", "thread", key, "err", err)
		r.trees.later(key)
	case why == "":
		r.trees.later(key)
	default:
		if r.trees.remove(key, r.removeWorktrees) {
			r.d.log.Info("removed a cloud thread's worktree", "thread", key, "why", why)
		}
	}
}

// treeGone says why key's worktree is no longer needed here, or "" when
// the thread may come back to this machine.
func (r *runner) treeGone(ctx context.Context, key string) (string, error) {
	ref, err := workflow.ParseRef(key)
	if err != nil || ref.Remote == "" || ref.Thread == "" {
		return "an older daemon's key, which this one never uses", nil
	}
	cl, err := remote.ForConfig(r.d.config(), ref.Remote)
	var unknown *remote.UnknownError
	if errors.As(err, &unknown) {
		return fmt.Sprintf("remote %s is no longer configured", ref.Remote), nil
	} else if err != nil {
		return "", err
	}
	th, err := cl.Thread(ctx, ref.Thread)
	switch {
	case remote.IsStatus(err, 404):
		return "the remote no longer knows the thread", nil
	case err != nil:
		return "", err
	case th.Ended():
		return "the thread ended (" + th.Status + ")", nil
	}
	me, err := r.trees.agent(ctx, cl)
	if err != nil {
		return "", err
	}
	evs, err := cl.Trace(ctx, ref.Thread)
	if err != nil {
		return "", err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if e := evs[i]; e.Type == workflow.EventTurnStarted && e.Agent != "" {
			if e.Agent != me {
				return fmt.Sprintf("agent %s took step %d", e.Agent, e.Step), nil
			}
			break
		}
	}
	return "", nil
}

// agent is this agent's name on cl's remote, asked once.
func (ct *cloudTrees) agent(ctx context.Context, cl *remote.Client) (string, error) {
	ct.mu.Lock()
	name, ok := ct.me[cl.Name]
	ct.mu.Unlock()
	if ok {
		return name, nil
	}
	name, err := cl.Me(ctx)
	if err != nil {
		return "", err
	}
	ct.mu.Lock()
	ct.me[cl.Name] = name
	ct.mu.Unlock()
	return name, nil
}
