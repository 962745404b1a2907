package usage

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input     float64 `yaml:"input" json:"input"`
	Output    float64 `yaml:"output" json:"output"`
	CacheRead float64 `yaml:"cache_read" json:"cache_read"`
}

// Priced fills u's cost from prices when the CLI gave tokens but no cost
// and its model has a price; otherwise u is left as it is (a cost stays
// unknown rather than guessed).
func Priced(u *Usage, prices map[string]Price) {
	if u == nil || u.CostUSD != nil || u.Model == "" || (u.InputTokens == nil && u.OutputTokens == nil) {
		return
	}
	p, ok := prices[u.Model]
	if !ok {
		return
	}
	c := float64(val(u.InputTokens))*p.Input + float64(val(u.OutputTokens))*p.Output +
		float64(val(u.CacheReadTokens))*p.CacheRead
	u.CostUSD = Float(c / 1e6)
}
