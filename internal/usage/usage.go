package usage

import (
	"encoding/json"
	"time"
)

// Usage is what the CLI reported about itself for the turn, normalised
// across CLIs. A figure the CLI did not give is nil (null in JSON): cost is
// the CLI's own or computed from pricing, never guessed. InputTokens are
// the input tokens not read from a cache; CacheReadTokens those that were
// (billed apart).
type Usage struct {
	Model           string
	InputTokens     *int64
	OutputTokens    *int64
	CacheReadTokens *int64
	CostUSD         *float64
	DurationMS      int64
	SessionID       string
	// ToolErrors counts the tool calls the CLI reported failed (the
	// "errors" detection reads it).
	ToolErrors int
}

// Int returns a pointer to n, for a figure the CLI gave.
func Int(n int64) *int64 { return &n }

// Float returns a pointer to f, for a cost that is known.
func Float(f float64) *float64 { return &f }

// Duration returns the turn's wall time.
func (u Usage) Duration() time.Duration { return time.Duration(u.DurationMS) * time.Millisecond }

// Tokens returns every token the turn processed: input, output and cache
// reads (what limits.max_tokens counts).
func (u Usage) Tokens() int64 {
	return val(u.InputTokens) + val(u.OutputTokens) + val(u.CacheReadTokens)
}

// Equal reports whether u and o hold the same figures.
func (u Usage) Equal(o Usage) bool {
	return u.Model == o.Model && u.SessionID == o.SessionID && u.DurationMS == o.DurationMS &&
		u.ToolErrors == o.ToolErrors && eq(u.InputTokens, o.InputTokens) && eq(u.OutputTokens, o.OutputTokens) &&
		eq(u.CacheReadTokens, o.CacheReadTokens) && eq(u.CostUSD, o.CostUSD)
}

func eq[T comparable](a, b *T) bool { return a == b || (a != nil && b != nil && *a == *b) }

func val[T int64 | float64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}

// wire is Usage's JSON: every key present, null when unknown.
type wire struct {
	Model           *string  `json:"model"`
	InputTokens     *int64   `json:"input_tokens"`
	OutputTokens    *int64   `json:"output_tokens"`
	CacheReadTokens *int64   `json:"cache_read_tokens"`
	CostUSD         *float64 `json:"cost_usd"`
	DurationMS      int64    `json:"duration_ms"`
	SessionID       *string  `json:"session_id"`
	ToolErrors      int      `json:"tool_errors"`
}

// legacy holds the keys of records written before usage was normalised:
// cached_tokens was cache_read_tokens, and zero figures were left out.
type legacy struct {
	wire
	CachedTokens *int64          `json:"cached_tokens"`
	CacheRead    json.RawMessage `json:"cache_read_tokens"`
}

// MarshalJSON writes every key, null for what is unknown.
func (u Usage) MarshalJSON() ([]byte, error) {
	w := wire{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CostUSD: u.CostUSD, DurationMS: u.DurationMS, ToolErrors: u.ToolErrors}
	if u.Model != "" {
		w.Model = &u.Model
	}
	if u.SessionID != "" {
		w.SessionID = &u.SessionID
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the normalised shape and the one stored before it.
func (u *Usage) UnmarshalJSON(data []byte) error {
	var l legacy
	if err := json.Unmarshal(data, &l); err != nil {
		return err
	}
	w := l.wire
	if l.CacheRead != nil {
		// The outer key shadows the embedded one.
		if err := json.Unmarshal(l.CacheRead, &w.CacheReadTokens); err != nil {
			return err
		}
	} else {
		// An old record: its token figures were left out when zero, and
		// it had some when the CLI reported any.
		w.CacheReadTokens = l.CachedTokens
		if w.InputTokens != nil || w.OutputTokens != nil || w.CacheReadTokens != nil {
			for _, p := range []**int64{&w.InputTokens, &w.OutputTokens, &w.CacheReadTokens} {
				if *p == nil {
					*p = Int(0)
				}
			}
		}
	}
	*u = Usage{InputTokens: w.InputTokens, OutputTokens: w.OutputTokens, CacheReadTokens: w.CacheReadTokens,
		CostUSD: w.CostUSD, DurationMS: w.DurationMS, ToolErrors: w.ToolErrors}
	if w.Model != nil {
		u.Model = *w.Model
	}
	if w.SessionID != nil {
		u.SessionID = *w.SessionID
	}
	return nil
}
