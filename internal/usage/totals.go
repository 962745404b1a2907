package usage

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Totals sum the usage of many messages (a thread's, a rollup group's).
type Totals struct {
	// Messages counts the messages with usage.
	Messages        int64 `json:"messages"`
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens"`
	// CostUSD sums the costs known; null when none was. Unpriced counts
	// the messages whose cost is unknown, so a partial sum says so.
	CostUSD    *float64 `json:"cost_usd"`
	Unpriced   int64    `json:"unpriced"`
	DurationMS int64    `json:"duration_ms"`
}

// Add counts one message's usage.
func (t *Totals) Add(u *Usage) {
	if u == nil {
		return
	}
	t.Messages++
	t.InputTokens += val(u.InputTokens)
	t.OutputTokens += val(u.OutputTokens)
	t.CacheReadTokens += val(u.CacheReadTokens)
	t.DurationMS += u.DurationMS
	if u.CostUSD == nil {
		t.Unpriced++
		return
	}
	t.CostUSD = Float(val(t.CostUSD) + *u.CostUSD)
}

// Merge adds o to t.
func (t *Totals) Merge(o Totals) {
	t.Messages += o.Messages
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.CacheReadTokens += o.CacheReadTokens
	t.DurationMS += o.DurationMS
	t.Unpriced += o.Unpriced
	if o.CostUSD != nil {
		t.CostUSD = Float(val(t.CostUSD) + *o.CostUSD)
	}
}

// Tokens returns every token counted: input, output and cache reads.
func (t Totals) Tokens() int64 { return t.InputTokens + t.OutputTokens + t.CacheReadTokens }

// Summary is the totals in a few words: "12,345 tokens, $0.0123" (cost
// "unknown" when no message had one, "≥ $x" when some had none).
func (t Totals) Summary() string {
	cost := "cost unknown"
	switch {
	case t.CostUSD != nil && t.Unpriced > 0:
		cost = "≥ " + Dollars(*t.CostUSD)
	case t.CostUSD != nil:
		cost = Dollars(*t.CostUSD)
	}
	return Count(t.Tokens()) + " tokens, " + cost
}

// Dollars formats an amount: cents above a dollar, four decimals below.
func Dollars(f float64) string {
	if f >= 1 {
		return fmt.Sprintf("$%.2f", f)
	}
	return fmt.Sprintf("$%.4f", f)
}

// Count formats n with thousands separators: 3,100,000.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// Limits bound what a thread may spend; zero means no bound.
type Limits struct {
	MaxCostUSD float64
	MaxTokens  int64
}

// Exceeded says which limit t has crossed ("budget: $5.12 spent of
// $5.00", "budget: 3,100,000 tokens of 3,000,000"), or "" when none.
// Reaching a limit exactly is within it.
func (l Limits) Exceeded(t Totals) string {
	if l.MaxCostUSD > 0 && t.CostUSD != nil && *t.CostUSD > l.MaxCostUSD {
		return fmt.Sprintf("budget: $%.2f spent of $%.2f", *t.CostUSD, l.MaxCostUSD)
	}
	if l.MaxTokens > 0 && t.Tokens() > l.MaxTokens {
		return fmt.Sprintf("budget: %s tokens of %s", Count(t.Tokens()), Count(l.MaxTokens))
	}
	return ""
}

// totalsSize is the length of Totals' binary form.
const totalsSize = 7 * 8

// AppendBinary appends t's binary form (how the stores keep a rollup row:
// cheap to read and write inside a write transaction).
func (t Totals) AppendBinary(b []byte) ([]byte, error) {
	cost := math.NaN() // no cost known
	if t.CostUSD != nil {
		cost = *t.CostUSD
	}
	for _, v := range []uint64{uint64(t.Messages), uint64(t.InputTokens), uint64(t.OutputTokens),
		uint64(t.CacheReadTokens), math.Float64bits(cost), uint64(t.Unpriced), uint64(t.DurationMS)} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b, nil
}

// UnmarshalBinary reads AppendBinary's form.
func (t *Totals) UnmarshalBinary(b []byte) error {
	if len(b) != totalsSize {
		return fmt.Errorf("usage totals: %d bytes, want %d", len(b), totalsSize)
	}
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[8*i:])) }
	*t = Totals{Messages: v(0), InputTokens: v(1), OutputTokens: v(2), CacheReadTokens: v(3), Unpriced: v(5), DurationMS: v(6)}
	if c := math.Float64frombits(uint64(v(4))); !math.IsNaN(c) {
		t.CostUSD = &c
	}
	return nil
}
