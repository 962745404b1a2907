package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/workflow"
)

// dueBatch is how many due turns one pass reads at a time.
const dueBatch = 256

// hintGap bounds how often a queued turn makes the sweeper look again: a
// busy queue changes all the time, and one look covers every turn queued
// before it.
const hintGap = 100 * time.Millisecond

// sweeper re-queues expired leases and raises idle events. It sleeps
// until the earliest deadline storage knows of, and wakes early when one
// may be earlier: poked when this server sets one, and on the queue's
// Changed topic for a turn queued anywhere else (another replica, which
// may be gone by its turn's deadline). It also looks every Recheck, since
// hints may be lost. Every change it makes is conditional on what it
// read, so two replicas sweeping the same turn change it once.
type sweeper struct {
	e    *Engine
	wake chan struct{}

	mu    sync.Mutex
	armed time.Time // when it will look next; zero while it is looking
}

func newSweeper(e *Engine) *sweeper { return &sweeper{e: e, wake: make(chan struct{}, 1)} }

// poke says a deadline at t now exists.
func (w *sweeper) poke(t time.Time) {
	w.mu.Lock()
	wake := w.armed.IsZero() || t.Before(w.armed)
	w.mu.Unlock()
	if wake {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *sweeper) arm(at time.Time) {
	w.mu.Lock()
	w.armed = at
	w.mu.Unlock()
}

func (w *sweeper) run(ctx context.Context) {
	for {
		// Taken before the look, so a turn queued during it wakes the
		// next sleep.
		queued := w.e.store.Changed(khaladb.TopicQueue)
		w.arm(time.Time{})
		next := w.sweep(ctx)
		looked := time.Now()
		wait := w.e.cfg.Recheck
		if !next.IsZero() {
			wait = min(wait, time.Until(next))
		}
		wait = max(wait, time.Millisecond)
		w.arm(looked.Add(wait))
		if !w.sleep(ctx, wait, queued, looked) {
			return
		}
	}
}

// sleep waits up to wait, or less when woken; a queued turn shortens the
// wait to hintGap after the last look. It reports false when ctx is done.
func (w *sweeper) sleep(ctx context.Context, wait time.Duration, queued <-chan struct{}, looked time.Time) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-w.wake:
			return true
		case <-queued:
			queued = nil
			at := looked.Add(hintGap)
			if !at.Before(looked.Add(wait)) {
				continue // the timer is due sooner anyway
			}
			w.arm(at)
			timer.Reset(max(time.Until(at), 0))
		}
	}
}

// sweep deals with everything due and returns the next deadline.
func (w *sweeper) sweep(ctx context.Context) time.Time {
	for ctx.Err() == nil {
		now := w.e.now()
		due, next, err := w.e.store.Due(ctx, now, dueBatch)
		if err != nil {
			// An unreachable database is logged once by the storage, not
			// every second by every loop.
			if ctx.Err() == nil && !errors.Is(err, khaladb.ErrUnavailable) {
				w.e.log.Error("sweep: read due turns", "err", err)
			}
			return now.Add(time.Second)
		}
		for _, d := range due {
			w.apply(ctx, d, now)
		}
		if len(due) < dueBatch {
			return next
		}
	}
	return time.Time{}
}

func (w *sweeper) apply(ctx context.Context, d khaladb.DueTurn, now time.Time) {
	e := w.e
	if d.Kind == khaladb.DueChild {
		e.checkChild(ctx, d)
		return
	}
	var (
		c      *khaladb.ThreadChange
		handed *reservation
	)
	defer func() { handed.settle(false) }() // if UpdateThread never returned
	err := e.store.UpdateThread(ctx, d.Thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
		handed.settle(false) // an earlier, stale try's promises
		handed = nil
		if d.Kind == khaladb.DueExpired {
			def, err := e.defs.get(ctx, v.Thread.SourceHash)
			if err != nil {
				return nil, err
			}
			if c = expireOverBudget(def, v, d, now); c == nil {
				c = expire(v, d, now)
				// A re-queued turn goes to a long poll waiting here, in
				// this commit, rather than waking every parked agent.
				handed = e.handoffs.reserve(c, now)
			}
		} else {
			c = idle(v, d, now)
		}
		return c, nil
	})
	handed.settle(err == nil)
	handed = nil
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("sweep: update thread", "thread", d.Thread, "turn", d.Turn, "kind", d.Kind, "err", err)
		}
		return
	}
	if c == nil {
		return
	}
	e.changed(c)
	switch {
	case d.Kind == khaladb.DueIdle:
		e.obs.TurnIdle()
		e.log.Info("turn idle", "thread", d.Thread, "turn", d.Turn)
	case c.Thread.Status == workflow.StatusFailed:
		e.obs.TurnExpired()
		e.log.Warn("thread failed: lease expired on the last attempt", "thread", d.Thread, "turn", d.Turn)
	default:
		e.obs.TurnExpired()
		e.log.Info("lease expired; turn re-queued", "thread", d.Thread, "turn", d.Turn)
	}
}
