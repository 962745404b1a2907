package usage

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dimensions are what usage can be grouped by.
var Dimensions = []string{"workflow", "role", "agent", "adapter", "model", "day"}

// CheckDimension returns an error naming the dimensions when by is not one.
func CheckDimension(by string) error {
	if slices.Contains(Dimensions, by) {
		return nil
	}
	return fmt.Errorf("unknown dimension %q (one of %s)", by, strings.Join(Dimensions, ", "))
}

// ParseSince reads a --since date (2006-01-02, UTC) into the first day it
// includes; "" is the zero time (no bound).
func ParseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q is not a date (want YYYY-MM-DD)", s)
	}
	return d, nil
}

// Key is a rollup row's identity: what a message was, when (UTC day).
type Key struct {
	Day      string `json:"day"` // 2006-01-02
	Workflow string `json:"workflow"`
	Role     string `json:"role"`
	Agent    string `json:"agent"`
	Adapter  string `json:"adapter"`
	Model    string `json:"model"`
}

// KeyOf is the rollup key of a message of workflow answered at at.
func KeyOf(at time.Time, workflow, role, agent, adapter string, u *Usage) Key {
	k := Key{Day: at.UTC().Format(time.DateOnly), Workflow: workflow, Role: role, Agent: agent, Adapter: adapter}
	if u != nil {
		k.Model = u.Model
	}
	return k
}

// Dim returns the key's value along a dimension.
func (k Key) Dim(by string) string {
	switch by {
	case "workflow":
		return k.Workflow
	case "role":
		return k.Role
	case "agent":
		return k.Agent
	case "adapter":
		return k.Adapter
	case "model":
		return k.Model
	case "day":
		return k.Day
	}
	return ""
}

// RowKey encodes k as a storage key, day first, so a --since query
// seeks to its day.
func RowKey(k Key) []byte {
	return bytes.Join([][]byte{[]byte(k.Day), []byte(k.Workflow), []byte(k.Role), []byte(k.Agent),
		[]byte(k.Adapter), []byte(k.Model)}, []byte{0})
}

// ParseRowKey decodes RowKey.
func ParseRowKey(b []byte) (Key, bool) {
	p := bytes.Split(b, []byte{0})
	if len(p) != 6 {
		return Key{}, false
	}
	return Key{Day: string(p[0]), Workflow: string(p[1]), Role: string(p[2]), Agent: string(p[3]),
		Adapter: string(p[4]), Model: string(p[5])}, true
}

// Row is one rollup row: the totals of every message with its key.
type Row struct {
	Key
	Totals
}

// Group is the totals of one value of a dimension.
type Group struct {
	Key string `json:"key"`
	Totals
}

// Report is the answer to a usage query (GET /v1/usage, `nerve usage
// --json`): every key present.
type Report struct {
	By       string  `json:"by"`
	Since    *string `json:"since"`
	Workflow *string `json:"workflow"`
	Groups   []Group `json:"groups"`
	Total    Totals  `json:"total"`
}

// Filter selects rows: on or after Since (a day; "" all) and of Workflow
// ("" all).
type Filter struct {
	Since    string
	Workflow string
}

// Match reports whether a row's key passes f.
func (f Filter) Match(k Key) bool {
	return (f.Since == "" || k.Day >= f.Since) && (f.Workflow == "" || k.Workflow == f.Workflow)
}

// Build groups rows by a dimension (rows already filtered), largest cost
// then most tokens first, days in date order.
func Build(rows []Row, by string, f Filter) Report {
	r := Report{By: by, Groups: []Group{}}
	if f.Since != "" {
		r.Since = &f.Since
	}
	if f.Workflow != "" {
		r.Workflow = &f.Workflow
	}
	idx := map[string]int{}
	for _, row := range rows {
		r.Total.Merge(row.Totals)
		k := row.Dim(by)
		i, ok := idx[k]
		if !ok {
			i = len(r.Groups)
			idx[k] = i
			r.Groups = append(r.Groups, Group{Key: k})
		}
		r.Groups[i].Merge(row.Totals)
	}
	slices.SortFunc(r.Groups, func(a, b Group) int {
		if by == "day" {
			return strings.Compare(a.Key, b.Key)
		}
		if c := cmpCost(b.CostUSD, a.CostUSD); c != 0 {
			return c
		}
		if c := b.Tokens() - a.Tokens(); c != 0 {
			return int(c / max(1, abs(c)))
		}
		return strings.Compare(a.Key, b.Key)
	})
	return r
}

func cmpCost(a, b *float64) int {
	x, y := val(a), val(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
