package sense

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/reflex"
	"github.com/nerve-agents/nerve/remote"
)

// pollWait is how long one claim request waits on the server for a turn.
const pollWait = 30 * time.Second

// Khala long-polls a remote's turn queue, claiming only into free
// capacity. Each claimed turn is emitted with Done, which its reflex must
// call when the turn is over to free the slot.
type Khala struct {
	name      string
	client    *remote.Client
	capacity  *Capacity
	workflows []string
	roles     []string
	log       *slog.Logger
	state     atomic.Value
	// Sleep waits between failed polls (tests make it short).
	Sleep func(context.Context, time.Duration) error
	// Adapter runs the turns this sense claims; while Gate holds it back
	// (a daily cap reached, a pause after rate limits) nothing is
	// claimed. A nil Gate holds nothing back.
	Adapter string
	Gate    Gate
	// Repos, when set, says per claim which repositories this machine
	// fetches, so Khala hands it no turn it would refuse (nil: any).
	Repos func() *api.RepoFilter
}

// Gate says whether an adapter may start turns now (*reflex.Gate is one).
type Gate interface {
	// Check returns why the adapter is held back (nil: it is not) and a
	// channel closed when a hold may have lifted early.
	Check(adapter string) (*reflex.Hold, <-chan struct{})
}

// NewKhala returns a khala sense over client.
func NewKhala(name string, client *remote.Client, capacity *Capacity, workflows, roles []string, logger *slog.Logger) *Khala {
	s := &Khala{name: name, client: client, capacity: capacity, workflows: workflows, roles: roles, log: logger}
	s.state.Store("starting")
	return s
}

func (s *Khala) Name() string  { return s.name }
func (s *Khala) Kind() string  { return "khala" }
func (s *Khala) State() string { return s.state.Load().(string) }

// Run polls until ctx is done. Errors back off exponentially with jitter
// (capped at a minute) and are logged when the state changes, not per
// attempt; an unauthorized answer backs off the longest, since only a new
// enrollment fixes it.
func (s *Khala) Run(ctx context.Context, emit func(reflex.Signal)) error {
	backoff := time.Second
	for ctx.Err() == nil {
		if !s.waitGate(ctx) {
			return nil
		}
		n, err := s.capacity.Acquire(ctx, 100)
		if err != nil {
			return nil
		}
		if h, _ := s.check(); h != nil {
			s.capacity.Release(n) // held back while waiting for a slot
			continue
		}
		req := api.ClaimRequest{Max: n, Workflows: s.workflows, Roles: s.roles}
		if s.Repos != nil {
			req.Repos = s.Repos()
		}
		turns, err := s.client.Claim(ctx, req, pollWait)
		s.capacity.Release(n - len(turns))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			state := "unavailable"
			if remote.IsStatus(err, http.StatusUnauthorized) {
				state, backoff = "unauthorized", time.Minute
			}
			s.setState(state, err)
			wait := backoff/2 + rand.N(backoff/2+1)
			if err := s.sleep(ctx, wait); err != nil {
				return nil
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
		s.setState("polling", nil)
		for _, t := range turns {
			var once atomic.Bool
			emit(reflex.Signal{Sense: s.name, At: time.Now().UTC(), Turn: t, Done: func() {
				if once.CompareAndSwap(false, true) {
					s.capacity.Release(1)
				}
			}})
		}
	}
	return nil
}

// waitGate returns when the sense's adapter may take turns, false when
// ctx ended first. While it waits the sense claims nothing, and says why.
func (s *Khala) waitGate(ctx context.Context) bool {
	for held := false; ; held = true {
		h, changed := s.check()
		if h == nil {
			if held {
				s.state.Store("polling")
				s.log.Info("khala sense claims again", "sense", s.name, "adapter", s.Adapter)
			}
			return true
		}
		if state := holdingPrefix + h.Reason; s.State() != state {
			s.state.Store(state)
			s.log.Info("khala sense holds its claims", "sense", s.name, "adapter", s.Adapter, "why", h.Reason, "for", h.Wait.Round(time.Second))
		}
		t := time.NewTimer(h.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		case <-changed:
			t.Stop()
		}
	}
}

// holdingPrefix starts the state of a sense whose adapter is held back.
const holdingPrefix = "holding claims: "

func (s *Khala) check() (*reflex.Hold, <-chan struct{}) {
	if s.Gate == nil || s.Adapter == "" {
		return nil, nil
	}
	return s.Gate.Check(s.Adapter)
}

// setState logs transitions only: "unavailable" once, "recovered" once.
func (s *Khala) setState(state string, err error) {
	prev := s.State()
	if prev == state {
		return
	}
	s.state.Store(state)
	switch {
	case err != nil:
		s.log.Warn("khala sense "+state, "sense", s.name, "remote", s.client.Name, "err", err)
	case prev == "unavailable" || prev == "unauthorized":
		s.log.Info("khala sense recovered", "sense", s.name, "remote", s.client.Name)
	}
}

func (s *Khala) sleep(ctx context.Context, d time.Duration) error {
	if s.Sleep != nil {
		return s.Sleep(ctx, d)
	}
	return remote.Wait(ctx, d)
}
