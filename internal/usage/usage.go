package usage

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Usage is what the CLI reported about itself for the turn, normalised
// across CLIs. A figure the CLI did not give is nil (null in JSON): cost is
// the CLI's own or computed from pricing, never guessed. InputTokens are
// the input tokens not read from a cache; CacheReadTokens those that were
// (billed apart).
//
// The tags name the JSON keys for tools that read the struct (the MCP
// SDK's output schemas); MarshalJSON and UnmarshalJSON do the work.
type Usage struct {
	Model           string   `json:"model"`
	InputTokens     *int64   `json:"input_tokens"`
	OutputTokens    *int64   `json:"output_tokens"`
	CacheReadTokens *int64   `json:"cache_read_tokens"`
	CostUSD         *float64 `json:"cost_usd"`
	DurationMS      int64    `json:"duration_ms"`
	SessionID       string   `json:"session_id"`
	// ToolErrors counts the tool calls the CLI reported failed (the
	// "errors" detection reads it).
	ToolErrors int `json:"tool_errors"`
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

// MarshalJSON writes every key, null for what is unknown. It is written
// out by hand: a message's usage is encoded with every answer Khala
// records and decoded with every read of its thread.
func (u Usage) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 192)
	b = append(b, `{"model":`...)
	b = appendString(b, u.Model)
	b = append(b, `,"input_tokens":`...)
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	b = append(b, `,"cache_read_tokens":`...)
	b = appendInt(b, u.CacheReadTokens)
	b = append(b, `,"cost_usd":`...)
	if u.CostUSD == nil || math.IsNaN(*u.CostUSD) || math.IsInf(*u.CostUSD, 0) {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendFloat(b, *u.CostUSD, 'g', -1, 64)
	}
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, u.DurationMS, 10)
	b = append(b, `,"session_id":`...)
	b = appendString(b, u.SessionID)
	b = append(b, `,"tool_errors":`...)
	b = strconv.AppendInt(b, int64(u.ToolErrors), 10)
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, null when empty.
func appendString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	q, _ := json.Marshal(s) // escapes as encoding/json does; cannot fail
	return append(b, q...)
}

func appendInt(b []byte, p *int64) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *p, 10)
}

// wire is Usage's JSON as read: the normalised keys, and cached_tokens of
// records written before usage was normalised (when zero figures were
// left out). cache_read_tokens says which a record is: new ones always
// have it, null or not.
type wire struct {
	Model           *string  `json:"model"`
	InputTokens     *int64   `json:"input_tokens"`
	OutputTokens    *int64   `json:"output_tokens"`
	CacheReadTokens present  `json:"cache_read_tokens"`
	CostUSD         *float64 `json:"cost_usd"`
	DurationMS      int64    `json:"duration_ms"`
	SessionID       *string  `json:"session_id"`
	ToolErrors      int      `json:"tool_errors"`
	CachedTokens    *int64   `json:"cached_tokens"`
}

// present is a count that remembers whether its key was there at all.
type present struct {
	set bool
	n   *int64
}

func (p *present) UnmarshalJSON(b []byte) error {
	p.set = true
	if string(b) == "null" {
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("cache_read_tokens: %s is not a whole number", b)
	}
	p.n = &n
	return nil
}

// UnmarshalJSON reads the normalised shape and the one stored before it.
func (u *Usage) UnmarshalJSON(data []byte) error {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*u = Usage{InputTokens: w.InputTokens, OutputTokens: w.OutputTokens, CacheReadTokens: w.CacheReadTokens.n,
		CostUSD: w.CostUSD, DurationMS: w.DurationMS, ToolErrors: w.ToolErrors}
	if !w.CacheReadTokens.set {
		// An old record: its token figures were left out when zero, and
		// it had some when the CLI reported any.
		u.CacheReadTokens = w.CachedTokens
		if u.InputTokens != nil || u.OutputTokens != nil || u.CacheReadTokens != nil {
			for _, p := range []**int64{&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens} {
				if *p == nil {
					*p = Int(0)
				}
			}
		}
	}
	if w.Model != nil {
		u.Model = *w.Model
	}
	if w.SessionID != nil {
		u.SessionID = *w.SessionID
	}
	return nil
}
