package workflow

import (
	"math"
	"time"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// Defaults of the limits a definition leaves out.
const (
	// DefaultMaxSteps bounds a thread whose definition sets no limit.
	DefaultMaxSteps    = 50
	defaultMaxAttempts = 3
	defaultClaim       = 10 * time.Minute
)

// Limits bound a thread.
type Limits struct {
	MaxSteps int               `yaml:"max_steps" json:"max_steps"`
	Claim    yamlfile.Duration `yaml:"claim" json:"claim,omitempty"`
	// MaxAttempts is how many times a cloud turn is leased before its
	// thread fails: 1 never re-queues it.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts,omitempty"`
	// Idle is how long a cloud turn waits unclaimed before the initiator
	// is told (0: never).
	Idle yamlfile.Duration `yaml:"idle" json:"idle,omitempty"`
	// MaxCostUSD and MaxTokens bound what a thread spends (0: no bound):
	// the answer that crosses one is recorded, then the thread fails.
	MaxCostUSD float64        `yaml:"max_cost_usd" json:"max_cost_usd,omitempty"`
	MaxTokens  yamlfile.Count `yaml:"max_tokens" json:"max_tokens,omitempty"`
}

// checkLimits reports every limit out of its range and fills the defaults
// of those left out. A count or lease written as 0 is refused rather than
// taken as "the default": 0 steps, attempts or lease time cannot run.
// Definitions were once accepted with those 0s (and max_attempts below 0,
// which a queue takes as 1), so those go to newRule: a stored definition
// keeps the old meaning, the default.
func checkLimits(l *Limits, lines yamlfile.Lines, bad, newRule func(field, format string, a ...any)) {
	given := func(key string) bool { _, ok := lines["limits."+key]; return ok }
	if given("max_steps") && l.MaxSteps < 1 {
		report := bad // below 0 was never accepted
		if l.MaxSteps == 0 {
			report = newRule
		}
		report("limits.max_steps", "must be at least 1, got %d (leave it out for the default, %d)", l.MaxSteps, DefaultMaxSteps)
	}
	if given("max_attempts") && l.MaxAttempts < 1 {
		newRule("limits.max_attempts", "must be at least 1, got %d (the times a turn is leased before its thread fails; 1: never re-queued)", l.MaxAttempts)
	}
	if given("claim") && l.Claim == 0 {
		newRule("limits.claim", "must be longer than 0s (the lease on a claimed turn; leave it out for the default, %s)", defaultClaim)
	}
	if c := l.MaxCostUSD; c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		bad("limits.max_cost_usd", "must be a non-negative amount in USD, got %v", c)
	}
	if l.MaxTokens < 0 {
		bad("limits.max_tokens", "must not be negative, got %d", l.MaxTokens)
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxAttempts == 0 {
		l.MaxAttempts = defaultMaxAttempts
	}
	if l.Claim == 0 {
		l.Claim = yamlfile.Duration(defaultClaim)
	}
}
