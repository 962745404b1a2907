package usage

import (
	"encoding/json"
	"testing"
)

func TestJSONEveryKeyNullWhenUnknown(t *testing.T) {
	b, err := json.Marshal(Usage{DurationMS: 12})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":null,"input_tokens":null,"output_tokens":null,"cache_read_tokens":null,"cost_usd":null,"duration_ms":12,"session_id":null,"tool_errors":0}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	u := Usage{Model: "m", InputTokens: Int(0), OutputTokens: Int(7), CacheReadTokens: Int(3), CostUSD: Float(0), SessionID: "s"}
	b, _ = json.Marshal(u)
	var back Usage
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(u) {
		t.Fatalf("round trip %s: %+v, %v", b, back, err)
	}
}

func TestReadsOldRecords(t *testing.T) {
	cases := []struct {
		name, raw string
		want      Usage
	}{
		{"cached_tokens and omitted zeros", `{"model":"gpt","input_tokens":80,"cached_tokens":40,"duration_ms":5,"tool_errors":1}`,
			Usage{Model: "gpt", InputTokens: Int(80), OutputTokens: Int(0), CacheReadTokens: Int(40), DurationMS: 5, ToolErrors: 1}},
		{"a cost", `{"model":"claude","input_tokens":1,"output_tokens":2,"cost_usd":0.5,"duration_ms":5}`,
			Usage{Model: "claude", InputTokens: Int(1), OutputTokens: Int(2), CacheReadTokens: Int(0), CostUSD: Float(0.5), DurationMS: 5}},
		{"no figures at all", `{"model":"Claude 4 Sonnet","duration_ms":5}`, Usage{Model: "Claude 4 Sonnet", DurationMS: 5}},
		{"new record with a null cache", `{"input_tokens":3,"cache_read_tokens":null,"output_tokens":null}`, Usage{InputTokens: Int(3)}},
	}
	for _, tc := range cases {
		var u Usage
		if err := json.Unmarshal([]byte(tc.raw), &u); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !u.Equal(tc.want) {
			t.Errorf("%s: got %s", tc.name, mustJSON(u))
		}
	}
}

func mustJSON(u Usage) string { b, _ := json.Marshal(u); return string(b) }

func TestPriced(t *testing.T) {
	prices := map[string]Price{"m": {Input: 3, Output: 15, CacheRead: 0.3}}
	u := &Usage{Model: "m", InputTokens: Int(1_000_000), OutputTokens: Int(100_000), CacheReadTokens: Int(1_000_000)}
	Priced(u, prices)
	if u.CostUSD == nil || *u.CostUSD != 3+1.5+0.3 {
		t.Fatalf("cost %v", u.CostUSD)
	}
	for _, u := range []*Usage{
		{Model: "other", InputTokens: Int(5)},                // no price
		{Model: "m"},                                         // no tokens reported
		{Model: "", InputTokens: Int(5)},                     // no model
		{Model: "m", InputTokens: Int(5), CostUSD: Float(9)}, // the CLI's own
	} {
		before := u.CostUSD
		Priced(u, prices)
		if u.CostUSD != before {
			t.Errorf("%s: cost changed to %v", mustJSON(*u), *u.CostUSD)
		}
	}
}

func TestTotalsAndLimits(t *testing.T) {
	var tot Totals
	tot.Add(&Usage{InputTokens: Int(1_000_000), OutputTokens: Int(2_000_000), CostUSD: Float(5.12)})
	tot.Add(&Usage{InputTokens: Int(100_000)})
	tot.Add(nil)
	if tot.Messages != 2 || tot.Tokens() != 3_100_000 || *tot.CostUSD != 5.12 || tot.Unpriced != 1 {
		t.Fatalf("totals %+v", tot)
	}
	if got := tot.Summary(); got != "3,100,000 tokens, ≥ $5.12" {
		t.Errorf("summary %q", got)
	}
	cases := []struct {
		l    Limits
		want string
	}{
		{Limits{MaxCostUSD: 5}, "budget: $5.12 spent of $5.00"},
		{Limits{MaxTokens: 3_000_000}, "budget: 3,100,000 tokens of 3,000,000"},
		{Limits{MaxCostUSD: 5.12, MaxTokens: 3_100_000}, ""},
		{Limits{}, ""},
	}
	for _, c := range cases {
		if got := c.l.Exceeded(tot); got != c.want {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
		}
	}
	if (Limits{MaxCostUSD: 1}).Exceeded(Totals{InputTokens: 5}) != "" {
		t.Error("an unknown cost crosses no cost limit")
	}
}

func TestBuild(t *testing.T) {
	row := func(day, wf, model string, cost float64) Row {
		r := Row{Key: Key{Day: day, Workflow: wf, Role: "r", Agent: "a", Adapter: "codex", Model: model}}
		r.Add(&Usage{InputTokens: Int(10), OutputTokens: Int(1), CostUSD: Float(cost)})
		return r
	}
	rows := []Row{row("2026-01-02", "w1", "m1", 1), row("2026-01-01", "w2", "m2", 3), row("2026-01-02", "w2", "m1", 1)}
	r := Build(rows, "model", Filter{})
	if len(r.Groups) != 2 || r.Groups[0].Key != "m2" || *r.Groups[1].CostUSD != 2 || r.Total.Messages != 3 {
		t.Fatalf("by model %+v", r)
	}
	r = Build(rows, "day", Filter{})
	if r.Groups[0].Key != "2026-01-01" || r.Groups[1].Messages != 2 {
		t.Fatalf("by day %+v", r)
	}
	if err := CheckDimension("colour"); err == nil {
		t.Error("an unknown dimension passed")
	}
	if _, err := ParseSince("yesterday"); err == nil {
		t.Error("a --since that is not a date passed")
	}
}

func TestTotalsBinary(t *testing.T) {
	for _, tot := range []Totals{{}, {Messages: 3, InputTokens: 1 << 40, OutputTokens: 7, CacheReadTokens: 9, CostUSD: Float(0), Unpriced: 1, DurationMS: 5},
		{Messages: 1, CostUSD: Float(5.12)}} {
		b, _ := tot.AppendBinary(nil)
		var back Totals
		if err := back.UnmarshalBinary(b); err != nil || mustTotals(back) != mustTotals(tot) {
			t.Fatalf("%s -> %s (%v)", mustTotals(tot), mustTotals(back), err)
		}
	}
	if err := new(Totals).UnmarshalBinary([]byte{1, 2}); err == nil {
		t.Fatal("a short record was read")
	}
}

func mustTotals(t Totals) string { b, _ := json.Marshal(t); return string(b) }

func TestJSONEscapesAndCosts(t *testing.T) {
	u := Usage{Model: "a \"quoted\" <model>\n", SessionID: "s", CostUSD: Float(1e-7), InputTokens: Int(-1)}
	b, err := json.Marshal(u)
	if err != nil || !json.Valid(b) {
		t.Fatalf("%s %v", b, err)
	}
	var back Usage
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(u) {
		t.Fatalf("round trip %s: %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"cache_read_tokens":"lots"}`), &back); err == nil {
		t.Fatal("a cache_read_tokens that is not a number was read")
	}
}
