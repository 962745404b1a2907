package sense

import (
	"context"
	"time"

	"github.com/nerve-agents/nerve/remote"
)

// Signal is something a sense noticed.
type Signal struct {
	Sense string
	At    time.Time
	// Path is the file that changed (file sense).
	Path string
	// Turn is a claimed remote turn (khala sense); its reflex must run
	// it, or release it when it cannot.
	Turn remote.Turn
	// Done, when set, must be called once the signal's work is over: it
	// frees the capacity slot a claimed turn holds.
	Done func()
}

// Sense runs until ctx is done, calling emit for each signal. emit must
// not block for long: a sense that claims work holds a capacity slot
// for it.
type Sense interface {
	Name() string
	Kind() string
	// State is a one-word summary for `daemon status` (watching,
	// polling, unavailable, ...).
	State() string
	Run(ctx context.Context, emit func(Signal)) error
}
