package engine

import (
	"context"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Claim leases up to q.Max turns to q.Agent, waiting up to wait for one
// (a long poll) unless closing closes or ctx ends first. While parked,
// an answer that queues a turn this poll takes may hand it over in its
// own commit (handoff.go). ErrCallerGone: ctx ended, and what was
// claimed for it went back to the queue.
func (e *Engine) Claim(ctx context.Context, q khaladb.ClaimQuery, wait time.Duration, closing <-chan struct{}) ([]api.Turn, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var (
		turns    []khaladb.Turn
		handedWS map[string]threadWS // of handed-over turns' threads
	)
	for {
		// Take the hint before looking, so a turn queued in between
		// still wakes us.
		hint := e.store.Changed(khaladb.TopicQueue)
		q.Now = e.now()
		var err error
		turns, err = e.store.Claim(ctx, q)
		if err != nil {
			return nil, err
		}
		if len(turns) > 0 || wait == 0 {
			break
		}
		wt := e.handoffs.park(q)
		stop, handed := false, false
		select {
		case turns = <-wt.got:
			handed = true
		case <-hint:
		case <-time.After(e.cfg.Recheck):
		case <-timer.C:
			stop = true
		case <-closing:
			stop = true
		case <-ctx.Done():
			stop = true
		}
		if !handed {
			turns = e.handoffs.leave(wt)
		}
		if len(turns) > 0 {
			handedWS = wt.ws
		}
		if len(turns) > 0 || stop {
			break
		}
	}
	if ctx.Err() != nil {
		e.giveBack(turns) // the agent is gone
		return nil, ErrCallerGone
	}
	ws, err := e.claimWorkspaces(ctx, turns, handedWS)
	if err != nil {
		e.giveBack(turns)
		return nil, err
	}
	out := make([]api.Turn, 0, len(turns))
	for _, t := range turns {
		e.obs.TurnClaimed(max(q.Now.Sub(t.QueuedAt), 0))
		e.sweep.poke(t.LeaseExpires)
		out = append(out, api.Turn{Turn: t.ID, Claim: t.Claim, Thread: t.Thread, Workflow: t.Workflow, Role: t.Role,
			Prompt: t.Prompt, Instruction: t.Instruction, Step: t.Step, Attempt: t.Attempt, LeaseExpires: t.LeaseExpires,
			Workspace: ws[t.Thread].ws, Parallel: ws[t.Thread].round.Has(t.Step), Merge: mergeWork(&t)})
	}
	return out, nil
}

// claimWorkspaces returns the workspace of each claimed turn's thread
// that has one. A handed-over turn's came with the change that queued it;
// a turn whose claim read its thread (Turn.Head) brought its own; a thread
// known to have none (handoffs.isBare) costs nothing; any other turn taken
// from the queue costs one read of its thread (one per thread, however
// many of its turns were claimed), for the head it starts from.
func (e *Engine) claimWorkspaces(ctx context.Context, turns []khaladb.Turn, handed map[string]threadWS) (map[string]threadWS, error) {
	var out map[string]threadWS
	seen := map[string]bool{}
	for _, t := range turns {
		if seen[t.Thread] {
			continue
		}
		seen[t.Thread] = true
		ws, ok := handed[t.Thread]
		if !ok && t.Head != nil {
			ws, ok = threadWS{ws: t.Head.Workspace, round: t.Head.Round}, true
		}
		if !ok && !e.handoffs.isBare(t.Thread) {
			v, err := e.store.Thread(ctx, t.Thread)
			if err != nil {
				return nil, err
			}
			if ws = (threadWS{ws: v.Thread.Workspace, round: v.Thread.Round}); ws.ws == nil {
				e.handoffs.sawBare(t.Thread)
			}
		}
		if ws.ws != nil {
			if out == nil {
				out = map[string]threadWS{}
			}
			out[t.Thread] = ws
		}
	}
	return out, nil
}

// giveBack re-queues turns claimed for a long poll whose agent left
// before it could be told: another agent need not wait for their lease.
func (e *Engine) giveBack(turns []khaladb.Turn) {
	for _, t := range turns {
		_ = e.releaseTurn(context.Background(), t.Thread, t.ID, t.Claim, t.Agent)
	}
}
