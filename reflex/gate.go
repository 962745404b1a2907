package reflex

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/store"
)

// KindBudget is the error kind of a turn whose adapter has reached a daily
// cap: the adapter did not run, and the moderator decides what follows.
const KindBudget = "budget"

// The back-off of an adapter whose CLI reports rate limits: paused after
// RateLimitsToPause such answers in a row, for FirstPause, doubling up to
// MaxPause while the answers after each pause are rate limited too; the
// first answer that succeeds ends it.
const (
	RateLimitsToPause = 3
	FirstPause        = 30 * time.Second
	MaxPause          = 30 * time.Minute
)

// Outcomes of a turn as the gate counts them (/metrics).
const (
	OutcomeOK          = "ok"
	OutcomeFailed      = "failed"
	OutcomeRateLimited = "rate_limited"
	OutcomeBudget      = "budget"
)

// Ledger reads what each adapter spent on a UTC day: nerve.db's spend
// records, which the store charges with the answers themselves.
type Ledger interface {
	Spent(day string) (map[string]store.Spend, error)
}

// Gate decides whether an adapter may start a turn now: not past a daily
// cap of nerve.yaml (adapters.NAME.daily_usd, daily_tokens), and not
// paused after rate limits. The executor asks before every turn and
// reports how each ended; the khala sense asks before it claims. It is
// safe for concurrent use.
type Gate struct {
	config func() *config.Config
	ledger Ledger
	log    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	state   map[string]*backoff
	changed chan struct{} // closed and replaced when a hold may have lifted
}

// backoff is one adapter's rate-limit state and turn counts.
type backoff struct {
	limited int           // rate-limited answers in a row
	pause   time.Duration // the last pause; 0 when not backing off
	until   time.Time     // paused until then
	waiting int           // local turns waiting for the pause to end
	turns   map[string]int64
}

// NewGate returns a gate reading caps from cfg as it is now and spend
// from ledger.
func NewGate(cfg func() *config.Config, ledger Ledger, logger *slog.Logger) *Gate {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{config: cfg, ledger: ledger, log: logger, state: map[string]*backoff{}, changed: make(chan struct{})}
}

// Hold is why an adapter may not start a turn now.
type Hold struct {
	// Budget: a daily cap is reached, and a turn fails with kind budget.
	// Otherwise the adapter is paused, and a local turn waits.
	Budget bool
	Reason string
	// Wait is how long until the hold lifts by itself (the pause's end,
	// 00:00 UTC); a config reload may lift it sooner (Changed).
	Wait time.Duration
}

// BudgetError is a turn refused by an adapter's daily cap.
type BudgetError struct{ Reason string }

func (e *BudgetError) Error() string { return e.Reason }

// Check returns the adapter's hold, nil when it may start a turn, and a
// channel closed when a hold may have lifted early. A nil gate holds
// nothing back.
func (g *Gate) Check(name string) (*Hold, <-chan struct{}) {
	if g == nil {
		return nil, nil
	}
	now := g.now()
	g.mu.Lock()
	changed := g.changed
	var h *Hold
	if b := g.state[name]; b != nil && now.Before(b.until) {
		h = &Hold{Reason: fmt.Sprintf("adapter %s paused after rate limits until %s", name, b.until.UTC().Format("15:04:05 UTC")),
			Wait: b.until.Sub(now)}
	}
	g.mu.Unlock()
	if c := g.capHold(name, now); c != nil {
		h = c
	}
	return h, changed
}

// Wait returns when the adapter may start a turn: at once, or when its
// pause ends (the turn queues rather than fails). It returns a
// *BudgetError when a daily cap is reached, and ctx's error when ctx ends.
func (g *Gate) Wait(ctx context.Context, name string) error {
	for {
		h, changed := g.Check(name)
		switch {
		case h == nil:
			return nil
		case h.Budget:
			g.count(name, OutcomeBudget)
			return &BudgetError{Reason: h.Reason}
		}
		g.waiting(name, 1)
		t := time.NewTimer(h.Wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-changed:
		}
		t.Stop()
		g.waiting(name, -1)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Ended records how a turn of the adapter ended (err: the adapter's
// error, nil on success) and pauses or resumes the adapter.
func (g *Gate) Ended(name string, err error) {
	now := g.now()
	outcome := OutcomeOK
	switch {
	case adapter.RateLimited(err):
		outcome = OutcomeRateLimited
	case err != nil:
		outcome = OutcomeFailed
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.backoff(name)
	b.turns[outcome]++
	switch outcome {
	case OutcomeOK:
		if b.pause > 0 {
			g.log.Info("adapter resumed: an answer succeeded after rate limits", "adapter", name)
		}
		b.limited, b.pause, b.until = 0, 0, time.Time{}
		g.wake()
	case OutcomeFailed:
		b.limited = 0 // not in a row any more; a pause already earned stays
	case OutcomeRateLimited:
		b.limited++
		switch {
		case now.Before(b.until):
			// A turn started before the pause: the pause stands.
		case b.pause > 0:
			b.pause = min(2*b.pause, MaxPause)
		case b.limited >= RateLimitsToPause:
			b.pause = FirstPause
		default:
			return
		}
		if !now.Before(b.until) {
			b.until = now.Add(b.pause)
			g.log.Warn("adapter paused after rate limits", "adapter", name, "in_a_row", b.limited, "for", b.pause)
		}
	}
}

// Changed wakes whoever waits on a hold: nerve.yaml changed, and a cap
// may have been raised.
func (g *Gate) Changed() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.wake()
	g.mu.Unlock()
}

// capHold is the hold of a daily cap reached, nil when there is none.
func (g *Gate) capHold(name string, now time.Time) *Hold {
	ac, ok := g.config().AdapterConfig(name)
	if !ok || (ac.DailyUSD == nil && ac.DailyTokens == nil) {
		return nil
	}
	spent := g.spent(now)[name]
	var what string
	switch {
	case ac.DailyUSD != nil && spent.USD >= *ac.DailyUSD:
		what = fmt.Sprintf("$%.2f spent of $%.2f", spent.USD, *ac.DailyUSD)
	case ac.DailyTokens != nil && spent.Tokens >= *ac.DailyTokens:
		what = fmt.Sprintf("%d tokens spent of %d", spent.Tokens, *ac.DailyTokens)
	default:
		return nil
	}
	return &Hold{Budget: true, Wait: nextDay(now).Sub(now),
		Reason: fmt.Sprintf("budget: adapter %s reached its daily cap (%s today, UTC); it starts no turn until 00:00 UTC", name, what)}
}

// spent reads today's spend; a store that cannot be read holds nothing
// back (it is logged), since caps are a ceiling, not the daemon's health.
func (g *Gate) spent(now time.Time) map[string]store.Spend {
	s, err := g.ledger.Spent(now.UTC().Format(store.DayFormat))
	if err != nil {
		g.log.Warn("read the adapters' spend", "err", err)
	}
	return s
}

func (g *Gate) count(name, outcome string) {
	g.mu.Lock()
	g.backoff(name).turns[outcome]++
	g.mu.Unlock()
}

func (g *Gate) waiting(name string, n int) {
	g.mu.Lock()
	g.backoff(name).waiting += n
	g.mu.Unlock()
}

// backoff returns name's state, made on first use; g.mu is held.
func (g *Gate) backoff(name string) *backoff {
	b := g.state[name]
	if b == nil {
		b = &backoff{turns: map[string]int64{}}
		g.state[name] = b
	}
	return b
}

func (g *Gate) wake() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// nextDay is the next 00:00 UTC after t.
func nextDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// AdapterState is one adapter as `daemon status` and /metrics show it.
type AdapterState struct {
	Name  string
	Day   string // the UTC day Spent is of
	Spent store.Spend
	// DailyUSD and DailyTokens are its caps; nil: none.
	DailyUSD    *float64
	DailyTokens *int64
	// Hold is why it starts no turn now, nil when it may.
	Hold        *Hold
	PausedUntil time.Time // zero when not paused
	Pause       time.Duration
	RateLimited int              // rate-limited answers in a row
	Waiting     int              // local turns waiting for its pause to end
	Turns       map[string]int64 // ended turns since the daemon started, by outcome
}

// States returns every adapter with a cap, spend today, or turns since
// the daemon started, by name.
func (g *Gate) States() []AdapterState {
	now := g.now()
	cfg := g.config()
	spent := g.spent(now)
	names := map[string]bool{}
	for n, a := range cfg.Adapters {
		if a.DailyUSD != nil || a.DailyTokens != nil {
			names[n] = true
		}
	}
	for n := range spent {
		names[n] = true
	}
	g.mu.Lock()
	for n := range g.state {
		names[n] = true
	}
	g.mu.Unlock()
	out := []AdapterState{}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		ac, _ := cfg.AdapterConfig(n)
		st := AdapterState{Name: n, Day: now.UTC().Format(store.DayFormat), Spent: spent[n],
			DailyUSD: ac.DailyUSD, DailyTokens: ac.DailyTokens, Turns: map[string]int64{}}
		st.Hold, _ = g.Check(n)
		g.mu.Lock()
		if b := g.state[n]; b != nil {
			if now.Before(b.until) {
				st.PausedUntil = b.until
			}
			st.Pause, st.RateLimited, st.Waiting, st.Turns = b.pause, b.limited, b.waiting, maps.Clone(b.turns)
		}
		g.mu.Unlock()
		out = append(out, st)
	}
	return out
}
