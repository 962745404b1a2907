package daemon

import (
	"github.com/nerve-agents/nerve/reflex"
)

// adapterStatus is the gate's view of the adapters for `daemon status`.
func (d *Daemon) adapterStatus() []AdapterStatus {
	out := []AdapterStatus{}
	if d.gate == nil {
		return out
	}
	for _, a := range d.gate.States() {
		s := AdapterStatus{Name: a.Name, Day: a.Day, SpentUSD: a.Spent.USD, SpentTokens: a.Spent.Tokens,
			DailyUSD: a.DailyUSD, DailyTokens: a.DailyTokens, State: adapterState(a),
			RateLimited: a.RateLimited, WaitingTurns: a.Waiting, Turns: a.Turns}
		if a.Hold != nil {
			s.Reason = &a.Hold.Reason
		}
		if !a.PausedUntil.IsZero() {
			until := a.PausedUntil.UTC()
			s.PausedUntil = &until
		}
		out = append(out, s)
	}
	return out
}

func adapterState(a reflex.AdapterState) string {
	switch {
	case a.Hold != nil && a.Hold.Budget:
		return "capped"
	case a.Hold != nil:
		return "paused"
	}
	return "ok"
}
