package sense

import (
	"context"

	"github.com/nerve-agents/nerve/reflex"
)

// Sense runs until ctx is done, calling emit for each signal. emit must
// not block for long: a sense that claims work holds a capacity slot
// for it.
type Sense interface {
	Name() string
	Kind() string
	// State is a one-word summary for `daemon status` (watching,
	// polling, unavailable, ...).
	State() string
	Run(ctx context.Context, emit func(reflex.Signal)) error
}
