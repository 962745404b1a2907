package sense

import (
	"context"
	"time"

	"github.com/nerve-agents/nerve/reflex"
)

// Interval emits a signal every period, the first one period after start.
type Interval struct {
	name  string
	every time.Duration
}

// NewInterval returns an interval sense.
func NewInterval(name string, every time.Duration) *Interval {
	return &Interval{name: name, every: every}
}

func (s *Interval) Name() string  { return s.name }
func (s *Interval) Kind() string  { return "interval" }
func (s *Interval) State() string { return "ticking every " + s.every.String() }

// Run ticks until ctx is done. Ticks missed while the machine slept are
// not replayed: the ticker drops them.
func (s *Interval) Run(ctx context.Context, emit func(reflex.Signal)) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			emit(reflex.Signal{Sense: s.name, At: now.UTC()})
		}
	}
}
