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
		n, err := s.capacity.Acquire(ctx, 100)
		if err != nil {
			return nil
		}
		turns, err := s.client.Claim(ctx, api.ClaimRequest{Max: n, Workflows: s.workflows, Roles: s.roles}, pollWait)
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
