package workflow

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

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

// Values encodes f as the query of a messages request
// (?role=&last=&since=&step=), for the daemon's and Khala's APIs alike.
func (f Filter) Values() url.Values {
	q := url.Values{}
	if f.Role != "" {
		q.Set("role", f.Role)
	}
	if f.Last > 0 {
		q.Set("last", strconv.Itoa(f.Last))
	}
	if f.Step > 0 {
		q.Set("step", strconv.Itoa(f.Step))
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	return q
}

// ParseFilter decodes a messages query; a bad value is an error that says
// which.
func ParseFilter(q url.Values) (Filter, error) {
	f := Filter{Role: q.Get("role")}
	var err error
	if s := q.Get("last"); s != "" {
		if f.Last, err = strconv.Atoi(s); err != nil || f.Last < 0 {
			return f, fmt.Errorf("last=%q is not a count", s)
		}
	}
	if s := q.Get("step"); s != "" {
		if f.Step, err = strconv.Atoi(s); err != nil || f.Step < 0 {
			return f, fmt.Errorf("step=%q is not a step number", s)
		}
	}
	if s := q.Get("since"); s != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return f, fmt.Errorf("since=%q is not an RFC 3339 time", s)
		}
	}
	return f, nil
}
