package console

import (
	"cmp"
	"slices"

	"github.com/nerve-agents/nerve/workflow"
)

// UsageSum adds up messages' usage four ways, for a Source's Usage.
type UsageSum struct {
	by [4]map[string]*UsageRow // workflow, agent, model, day
}

// Add counts one message of a thread of workflow wf. A message without
// usage counts as a turn with none.
func (s *UsageSum) Add(wf string, m workflow.Message) {
	model, day := "unknown", m.At.UTC().Format("2006-01-02")
	if m.Usage != nil && m.Usage.Model != "" {
		model = m.Usage.Model
	}
	agent := m.Agent
	if agent == "" {
		agent = "unknown"
	}
	for i, key := range []string{wf, agent, model, day} {
		if s.by[i] == nil {
			s.by[i] = map[string]*UsageRow{}
		}
		r := s.by[i][key]
		if r == nil {
			r = &UsageRow{Key: key}
			s.by[i][key] = r
		}
		r.Turns++
		r.Totals.Add(m.Usage)
	}
}

// Report returns the sums, costliest first (days newest first).
func (s *UsageSum) Report(scope string) *UsageReport {
	rows := func(i int, byKey bool) []UsageRow {
		out := []UsageRow{}
		for _, r := range s.by[i] {
			out = append(out, *r)
		}
		slices.SortFunc(out, func(a, b UsageRow) int {
			if byKey {
				return cmp.Compare(b.Key, a.Key)
			}
			return cmp.Or(cmp.Compare(costOf(b), costOf(a)), cmp.Compare(b.InputTokens+b.OutputTokens, a.InputTokens+a.OutputTokens), cmp.Compare(a.Key, b.Key))
		})
		return out
	}
	return &UsageReport{Scope: scope, ByWorkflow: rows(0, false), ByAgent: rows(1, false), ByModel: rows(2, false), ByDay: rows(3, true)}
}

// costOf is a row's known cost (0 when none is known), for sorting.
func costOf(r UsageRow) float64 {
	if r.CostUSD == nil {
		return 0
	}
	return *r.CostUSD
}
