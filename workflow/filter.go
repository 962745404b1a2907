package workflow

import "time"

// Filter selects messages: the query an agent makes of its thread instead
// of being handed all of it. Zero fields select everything.
type Filter struct {
	Role  string
	Last  int
	Since time.Time
	Step  int
}

// Apply returns the messages (in step order) that f selects; Last applies
// after the other conditions.
func (f Filter) Apply(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if f.Role != "" && m.Role != f.Role {
			continue
		}
		if f.Step != 0 && m.Step != f.Step {
			continue
		}
		if !f.Since.IsZero() && m.At.Before(f.Since) {
			continue
		}
		out = append(out, m)
	}
	if f.Last > 0 && len(out) > f.Last {
		out = out[len(out)-f.Last:]
	}
	return out
}
