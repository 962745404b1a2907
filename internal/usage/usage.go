package usage

import "time"

// Usage is what the CLI reported about itself for the turn.
type Usage struct {
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CachedTokens int64   `json:"cached_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
	SessionID    string  `json:"session_id,omitempty"`
	DurationMS   int64   `json:"duration_ms"`
	ToolErrors   int     `json:"tool_errors,omitempty"`
}

// Duration returns the turn's wall time.
func (u Usage) Duration() time.Duration { return time.Duration(u.DurationMS) * time.Millisecond }
