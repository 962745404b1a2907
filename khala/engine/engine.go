package engine

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Sources gives a definition's stored source by its content hash; a
// khaladb.Storage is one.
type Sources interface {
	Source(ctx context.Context, hash string) ([]byte, error)
}

// Observer is told of what the engine did, for a server's metrics. Its
// methods must be cheap and safe for concurrent use.
type Observer interface {
	ThreadStarted()
	ThreadEnded(status string)
	TurnClaimed(waited time.Duration) // queued for waited before the claim
	TurnAnswered(worked time.Duration)
	TurnReleased()
	TurnExpired()
	TurnIdle()
}

// Config builds an Engine. Zero values take the defaults.
type Config struct {
	Store khaladb.Storage
	// Sources holds the definitions' sources (nil: Store).
	Sources Sources
	// Now is the clock, in UTC (nil: time.Now().UTC()).
	Now func() time.Time
	// MaxSpawnDepth bounds how deep child threads nest (0:
	// workflow.DefaultMaxSpawnDepth).
	MaxSpawnDepth int
	// Recheck is how often waiters and the sweeper look again without a
	// wake-up hint: hints may be lost on a shared database. Default 5s.
	Recheck time.Duration
	// FollowUpTimeout bounds the work a committed change calls for beyond
	// its thread (child threads started, parents told). Default 30s.
	FollowUpTimeout time.Duration
	Logger          *slog.Logger
	Observer        Observer // nil: none
}

// Engine holds every transition of a thread over a khaladb.Storage: each
// reads a view, decides a change as a function of it (so UpdateThread may
// run it again on a fresher view), and writes it; then does what the
// committed change calls for beyond its thread (follow-ups, wake-ups).
type Engine struct {
	cfg      Config
	store    khaladb.Storage
	defs     *defCache
	now      func() time.Time
	log      *slog.Logger
	obs      Observer
	sweep    *sweeper
	handoffs handoffs   // long polls a new turn may be handed to
	docs     threadDocs // moderator documents between a thread's turns
}

// New returns an Engine; call Run for its sweeper.
func New(c Config) *Engine {
	if c.Sources == nil {
		c.Sources = c.Store
	}
	if c.Now == nil {
		c.Now = func() time.Time { return time.Now().UTC() }
	}
	if c.Recheck <= 0 {
		c.Recheck = 5 * time.Second
	}
	if c.FollowUpTimeout <= 0 {
		c.FollowUpTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	e := &Engine{cfg: c, store: c.Store, defs: newDefCache(c.Sources), now: c.Now, log: c.Logger, obs: c.Observer}
	e.sweep = newSweeper(e)
	return e
}

// Run sweeps (lease expiry, idle turns, child checks) until ctx ends.
func (e *Engine) Run(ctx context.Context) { e.sweep.run(ctx) }

// Definition returns the definition with hash, parsing its source once.
func (e *Engine) Definition(ctx context.Context, hash string) (*workflow.Definition, error) {
	return e.defs.get(ctx, hash)
}

// Remember caches def, just published under hash.
func (e *Engine) Remember(hash string, def *workflow.Definition) { e.defs.put(hash, def) }

// Parked counts the long polls waiting here for a turn.
func (e *Engine) Parked() int { return e.handoffs.parked() }

// Asleep reports whether the sweeper waits on its timer rather than
// looking at the queue.
func (e *Engine) Asleep() bool {
	e.sweep.mu.Lock()
	defer e.sweep.mu.Unlock()
	return !e.sweep.armed.IsZero()
}

// changed updates what the engine tracks after a committed change: end
// counters and the sweeper's next deadline; then it follows c up.
func (e *Engine) changed(c *khaladb.ThreadChange) {
	defer e.followUp(c)
	if c.Thread.Ended() {
		for _, ev := range c.Events {
			if ev.Type == workflow.EventThreadEnded {
				e.obs.ThreadEnded(ev.Status)
			}
		}
	}
	for _, t := range c.Turns {
		switch {
		case (t.State == khaladb.TurnQueued || t.State == khaladb.TurnWaiting) && !t.IdleAt.IsZero():
			e.sweep.poke(t.IdleAt)
		case t.State == khaladb.TurnChild:
			e.sweep.poke(t.LeaseExpires)
		}
	}
}

// openTurns returns v's queued and claimed turns but except.
func openTurns(v *khaladb.ThreadView, except string) []khaladb.Turn {
	var out []khaladb.Turn
	for _, t := range v.Turns {
		if t.Open() && t.ID != except {
			out = append(out, t)
		}
	}
	return out
}

// setTurn puts t in c, replacing an earlier version of the same turn.
func setTurn(c *khaladb.ThreadChange, t khaladb.Turn) {
	if i := slices.IndexFunc(c.Turns, func(x khaladb.Turn) bool { return x.ID == t.ID }); i >= 0 {
		c.Turns[i] = t
		return
	}
	c.Turns = append(c.Turns, t)
}

type nopObserver struct{}

func (nopObserver) ThreadStarted()             {}
func (nopObserver) ThreadEnded(string)         {}
func (nopObserver) TurnClaimed(time.Duration)  {}
func (nopObserver) TurnAnswered(time.Duration) {}
func (nopObserver) TurnReleased()              {}
func (nopObserver) TurnExpired()               {}
func (nopObserver) TurnIdle()                  {}
