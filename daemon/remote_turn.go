package daemon

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/telemetry"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// errClaimLost ends an adapter whose lease the server no longer grants
// (lost, or the thread was cancelled): its answer would be refused.
var errClaimLost = errors.New("claim lost")

// RunTurn runs a claimed remote turn (a do: turn reflex): claim recorded,
// adapter run with heartbeats while it lives, answer extracted and put in
// the outbox before it is sent. It returns at once; done frees the slot.
func (r *runner) RunTurn(remoteName string, t api.Turn, adapterName string, done func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer done()
		defer func() {
			// What runs the adapter recovers in guard; this keeps the
			// daemon alive through a panic anywhere else in the turn (its
			// claim, if still recorded, is given back at the next start).
			if p := recover(); p != nil {
				r.d.log.Error("remote turn panicked", "remote", remoteName, "turn", t.Turn, "panic", p, "stack", string(debug.Stack()))
			}
		}()
		r.runRemoteTurn(remoteName, t, adapterName, done)
	}()
}

// ReleaseTurn gives a claimed turn back to the queue.
func (r *runner) ReleaseTurn(remoteName string, t api.Turn, done func()) {
	defer done()
	r.release(remoteName, t)
}

func (r *runner) release(remoteName string, t api.Turn) {
	cl, err := remote.ForConfig(r.d.config(), remoteName)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cl.Release(ctx, t.Turn, t.Claim)
		cancel()
	}
	if err != nil && !remote.IsClaimLost(err) && !remote.IsStatus(err, 404) {
		r.d.log.Warn("release turn", "remote", remoteName, "turn", t.Turn, "err", err)
	}
	r.deleteClaim(remoteName, t.Turn)
}

// runRemoteTurn runs the turn; done frees its capacity slot as soon as the
// adapter is done and the answer known, so the next claim is on its way
// while the answer is made durable and delivered: parked on the server
// before the answer arrives, it is handed the thread's next turn in the
// answer's own commit.
func (r *runner) runRemoteTurn(remoteName string, t api.Turn, adapterName string, done func()) {
	start := time.Now()
	cfg := r.d.config()
	cl, err := remote.ForConfig(cfg, remoteName)
	if err != nil {
		r.d.log.Error("remote turn", "remote", remoteName, "err", err)
		return
	}
	if h, _ := r.d.gate.Check(adapterName); h != nil && t.Merge == nil { // a merge runs no adapter
		// Held back since it was claimed (a cap reached, a pause): another
		// agent may take it now, where this one would have to wait.
		r.d.log.Info("giving back a claimed turn: its adapter is held back", "turn", t.Turn, "why", h.Reason)
		r.release(remoteName, t)
		return
	}
	if err := r.putClaim(claimRecord{Remote: remoteName, Turn: t, Adapter: adapterName, StartedAt: time.Now().UTC()}); err != nil {
		r.d.log.Error("record claim", "turn", t.Turn, "err", err)
		r.release(remoteName, t)
		return
	}
	if r.isDraining() {
		r.release(remoteName, t)
		return
	}
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	ctx, span := r.startRemoteSpan(ctx, cl.BaseURL, remoteName, t, adapterName)
	hbDone := r.heartbeat(ctx, cancel, cl, t)
	resp, ok := r.guard(remoteName, t, adapterName, func() (api.Response, bool) {
		if why := r.d.repoRefusal(ctx, cl, remoteName, t); why != "" {
			return r.refusedRepo(remoteName, t, adapterName, why), true
		}
		if t.Merge != nil {
			return r.execMerge(ctx, remoteName, t)
		}
		return r.execRemote(ctx, cl, remoteName, t, adapterName)
	})
	ran := time.Now()
	cancel(nil)
	<-hbDone
	if !ok {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errClaimLost):
			span.Interrupted("claim lost")
			r.d.log.Info("dropped a turn whose claim was lost", "remote", remoteName, "turn", t.Turn)
			r.deleteClaim(remoteName, t.Turn)
		default: // shutdown: give the turn back for another agent
			span.Interrupted("shutdown")
			r.release(remoteName, t)
		}
		return
	}
	defer endSpan(span, workflow.Message{Usage: resp.Usage, Error: resp.Error})
	done()
	item, err := r.d.store.Enqueue(store.OutboxItem{Remote: remoteName, Turn: t.Turn, Thread: t.Thread, Response: resp,
		QueuedAt: time.Now().UTC(), Traceparent: telemetry.Traceparent(ctx)})
	if err != nil {
		r.d.log.Error("queue response", "turn", t.Turn, "err", err)
		return
	}
	r.deleteClaim(remoteName, t.Turn) // the outbox has it now
	queued := time.Now()
	ans, sent := r.d.outbox.sendNow(context.WithoutCancel(ctx), item) // ctx: the turn's span
	if m, ok := ans.Message(t, resp); sent && ok && t.Merge == nil {
		r.hist.add(historyKey(remoteName, t), m)
	}
	ended := sent && ans.Status != "" && ans.Status != workflow.StatusRunning
	if ended {
		r.d.rdefs.forget(historyKey(remoteName, t))
	}
	if t.Workspace != nil {
		r.settleTree(historyKey(remoteName, t), ended)
	}
	r.d.log.Debug("remote turn", "turn", t.Turn, "remote", remoteName, "run", ran.Sub(start),
		"outbox", queued.Sub(ran), "send", time.Since(queued), "sent", sent)
}

// guard runs a remote turn's work; a panic in it fails the turn, with an
// answer of error kind internal sent as any other, instead of ending the
// daemon and every turn it runs (a local thread's panic is recovered in
// launch).
func (r *runner) guard(remoteName string, t api.Turn, adapterName string, run func() (api.Response, bool)) (resp api.Response, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r.d.log.Error("remote turn panicked; it fails", "remote", remoteName, "turn", t.Turn, "panic", p, "stack", string(debug.Stack()))
			resp, ok = api.Response{Claim: t.Claim, Adapter: adapterName, Error: &workflow.MessageError{Kind: errorKindInternal,
				Message: fmt.Sprintf("internal error in agent %s's daemon: %v", r.d.config().Agent.Name, p)}}, true
		}
	}()
	return run()
}

// errorKindInternal is a turn's error kind when nerve itself failed.
const errorKindInternal = "internal"

// settleTree removes a cloud thread's worktree when the thread ended with
// this turn's answer; otherwise it is kept for the thread's next turn here
// until a check finds the thread gone elsewhere (cloudtrees.go).
func (r *runner) settleTree(key string, ended bool) {
	if ended {
		r.trees.remove(key, r.removeWorktrees)
	}
}

// historyKey names a remote thread on this machine: its cached history,
// snapshot, process records and worktrees. It is the thread's ref
// (origin/code-review#thread-7): a remote's and a workflow's names have
// neither "/" nor "#", so a key reads back as one remote's thread only
// (the old REMOTE--WORKFLOW--THREAD did not: remotes "o" and "o--x").
func historyKey(remoteName string, t api.Turn) string {
	return workflow.Ref{Remote: remoteName, Workflow: t.Workflow, Thread: t.Thread}.String()
}

// execRemote runs a remote turn through the executor; ok is false when
// the turn was interrupted (claim lost, shutdown) and has no answer.
// What is remote about it is prepared here: the thread's history (for
// the snapshot), the role's definition (for its meta schema, read while
// the adapter runs), and detections sent on to the remote's trace.
func (r *runner) execRemote(ctx context.Context, cl *remote.Client, remoteName string, t api.Turn, adapterName string) (api.Response, bool) {
	ref := workflow.Ref{Remote: remoteName, Workflow: t.Workflow, Thread: t.Thread}.String()
	key := historyKey(remoteName, t)
	roleCh := make(chan *workflow.Role, 1)
	// The turn waits for the role's definition before it ends, so a
	// thread's definition is remembered before its end forgets it.
	role := sync.OnceValue(func() *workflow.Role { return <-roleCh })
	defer role()
	go func() {
		defer func() {
			if p := recover(); p != nil { // not the turn's goroutine: guard does not see it
				r.d.log.Error("reading a remote role panicked; no structured output", "turn", t.Turn, "panic", p, "stack", string(debug.Stack()))
				roleCh <- nil
			}
		}()
		roleCh <- r.d.remoteRole(ctx, cl, remoteName, t)
	}()
	history, err := r.hist.get(ctx, cl, key, t.Thread, t.Step)
	if err != nil && ctx.Err() == nil {
		r.d.log.Warn("read remote thread for its snapshot", "thread", ref, "err", err)
	}
	if t.Workspace != nil {
		r.trees.begin(key) // not removed while the turn runs
		defer r.trees.end(key)
	} else {
		// Someone else's prompt: its scratch directory is its own and
		// goes with the turn (the thread's next turn may run anywhere).
		defer r.scratch.Remove(key, t.Step)
	}
	// The snapshot stays while the history is cached (histories removes
	// it on eviction), so the next turn of the thread only appends to it.
	a, ok := r.exec.Run(ctx, &reflex.Turn{
		Thread: ref, Ref: ref, Key: key, Step: t.Step, Role: t.Role, Adapter: adapterName,
		Prompt: t.Prompt, History: history, OwnScratch: true,
		Workspace: remoteWorkspace(t, key),
		RoleDef:   role,
		Detected:  func(e workflow.Event) { r.reportDetection(ctx, cl, t, e) },
	})
	if !ok {
		return api.Response{}, false
	}
	return api.Response{Claim: t.Claim, Adapter: adapterName, Content: a.Content, Meta: a.Meta, Usage: a.Usage, Error: a.Error,
		Commit: a.Commit, Changes: a.Changes}, true
}

// remoteWorkspace is where a cloud thread's turn works: a worktree of this
// machine's mirror of the shared repository at the thread's head, kept
// under the thread's key for its next turn here (Open resets it when
// another machine moved the branch meanwhile).
func remoteWorkspace(t api.Turn, key string) *workspace.Turn {
	w := t.Workspace
	if w == nil {
		return nil
	}
	return &workspace.Turn{Workspace: workspace.Workspace{Repo: w.Repo, Cloud: true, Base: w.Base, Branch: w.Branch, Head: w.Head},
		Key: key, Step: t.Step, Parallel: t.Parallel}
}

// heartbeat renews the lease about three times per lease while the turn
// runs; a lost claim, a claim the remote says is another agent's (403
// not_holder: this agent's token changed since it claimed) or a cancelled
// thread cancels the turn. Another 403 (a proxy's) is retried.
func (r *runner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, cl *remote.Client, t api.Turn) <-chan struct{} {
	done := make(chan struct{})
	lease := time.Until(t.LeaseExpires)
	if lease <= 0 {
		lease = time.Minute
	}
	every := max(lease/3, 100*time.Millisecond)
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			hctx, hcancel := context.WithTimeout(ctx, every)
			_, cancelled, err := cl.Heartbeat(hctx, t.Turn, t.Claim)
			hcancel()
			switch {
			case remote.IsClaimLost(err) || remote.IsNotHolder(err) || remote.IsStatus(err, 404) || cancelled:
				r.d.log.Info("turn taken back by the remote; stopping its adapter", "turn", t.Turn, "cancelled", cancelled)
				cancel(errClaimLost)
				return
			case err != nil && ctx.Err() == nil:
				r.d.log.Warn("heartbeat failed; retrying", "turn", t.Turn, "err", err)
			}
		}
	}()
	return done
}

// maxDetectionMessage keeps a detection's message within what Khala
// accepts (4 KiB).
const maxDetectionMessage = 4000

// reportDetection sends a detection of a running remote turn to the
// remote's trace. It costs a request only when something was detected.
func (r *runner) reportDetection(ctx context.Context, cl *remote.Client, t api.Turn, e workflow.Event) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg := e.Message
	if len(msg) > maxDetectionMessage {
		msg = strings.ToValidUTF8(msg[:maxDetectionMessage], "") + "…"
	}
	err := cl.TurnEvents(ctx, t.Turn, t.Claim, api.TurnEvent{Type: e.Type, Status: e.Status, Message: msg, Adapter: e.Adapter})
	switch {
	case err == nil, ctx.Err() != nil:
	case remote.IsClaimLost(err):
		// The turn is no longer ours; the heartbeat stops its adapter.
		r.d.log.Debug("detection of a turn whose claim was lost", "remote", cl.Name, "turn", t.Turn)
	default:
		r.d.log.Warn("send detection to the remote", "remote", cl.Name, "turn", t.Turn, "err", err)
	}
}
