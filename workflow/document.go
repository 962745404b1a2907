package workflow

import (
	"encoding/json"
	"time"

	"github.com/recolabs/gnata"

	"github.com/nerve-agents/nerve/internal/usage"
)

// jsonNull is gnata's JSON null. Go's nil means "undefined" to JSONata, so
// a document built from Go values must use this where JSON has null (the
// moderator tests `last = null`).
var jsonNull = func() any {
	v, err := gnata.DecodeJSON([]byte("null"))
	if err != nil {
		panic(err)
	}
	return v
}()

// document builds the moderator's input as plain values, exactly the JSON
// shape of State (times as RFC 3339 strings, absent values as null),
// without a JSON round trip: encoding and re-decoding the whole history on
// every turn would cost more than the rest of the turn's bookkeeping.
func (s State) document() map[string]any {
	ws := s.Workspace != nil
	msgs := make([]any, len(s.Messages))
	for i := range s.Messages {
		msgs[i] = s.docs.get(&s.Messages[i], ws)
	}
	var last any = jsonNull
	if s.Last != nil {
		last = s.Last.document(ws)
		if n := len(s.Messages); n > 0 && s.Last == &s.Messages[n-1] {
			last = msgs[n-1]
		}
	}
	doc := map[string]any{
		"workflow": s.Workflow,
		"thread":   s.Thread,
		"input":    plain(s.Input),
		"step":     float64(s.Step),
		"messages": msgs,
		"last":     last,
		"usage":    totalsDoc(s.Usage),
	}
	if ws {
		w := s.Workspace
		doc["workspace"] = map[string]any{"repo": w.Repo, "base": w.Base, "branch": w.Branch, "head": w.Head}
	}
	return doc
}

// totalsDoc is t in its JSON shape (cost null when none is known).
func totalsDoc(t usage.Totals) map[string]any {
	var cost any = jsonNull
	if t.CostUSD != nil {
		cost = *t.CostUSD
	}
	return map[string]any{
		"messages": float64(t.Messages), "input_tokens": float64(t.InputTokens), "output_tokens": float64(t.OutputTokens),
		"cache_read_tokens": float64(t.CacheReadTokens), "cost_usd": cost, "unpriced": float64(t.Unpriced),
		"duration_ms": float64(t.DurationMS),
	}
}

// document is m's moderator document; ws: its thread has a workspace, so
// commit and changes are there, null when absent (without one they are
// left out, which costs a thread without a workspace nothing).
func (m *Message) document(ws bool) map[string]any {
	doc := map[string]any{
		"step":    float64(m.Step),
		"role":    m.Role,
		"agent":   m.Agent,
		"content": m.Content,
		"meta":    plain(m.Meta),
		"error":   jsonNull,
		"at":      m.At.UTC().Format(time.RFC3339Nano),
	}
	if m.Error != nil {
		doc["error"] = map[string]any{"kind": m.Error.Kind, "message": m.Error.Message}
	}
	if m.Instruction != "" {
		doc["instruction"] = m.Instruction
	}
	if m.Adapter != "" {
		doc["adapter"] = m.Adapter
	}
	if m.Usage != nil {
		doc["usage"] = plain(m.Usage)
	}
	if m.Child != "" {
		doc["child"] = m.Child
	}
	if ws || m.Commit != "" || m.Changes != nil {
		doc["commit"], doc["changes"] = jsonNull, jsonNull
		if m.Commit != "" {
			doc["commit"] = m.Commit
		}
		if c := m.Changes; c != nil {
			doc["changes"] = map[string]any{"files": float64(c.Files), "insertions": float64(c.Insertions), "deletions": float64(c.Deletions)}
		}
	}
	return doc
}

// plain turns a decoded-JSON-like value into what gnata expects: numbers
// as float64, nulls as jsonNull. Anything else (a struct) goes through
// JSON once.
func plain(v any) any {
	switch x := v.(type) {
	case nil:
		return jsonNull
	case string, bool, float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	default:
		raw, err := json.Marshal(x)
		if err != nil {
			return jsonNull
		}
		var back any
		if json.Unmarshal(raw, &back) != nil {
			return jsonNull
		}
		return plain(back)
	}
}

// DocCache keeps each message's moderator document, built once: a stored
// message never changes, and rebuilding a long thread's history on every
// turn would make routing cost grow with the thread. The zero value (and
// nil) builds every time. Not safe for concurrent use.
type DocCache struct {
	byStep map[int]docEntry
}

// docEntry is a cached document and what it was built from that may
// change after a message is first seen: a parallel round's merge sets an
// error, a commit or changes on a message stored before.
type docEntry struct {
	at     time.Time
	ws     bool
	commit string
	err    *MessageError
	chg    *Changes
	doc    map[string]any
}

func (e *docEntry) fresh(m *Message, ws bool) bool {
	return e.at.Equal(m.At) && e.ws == ws && e.commit == m.Commit && ptrEqual(e.err, m.Error) && ptrEqual(e.chg, m.Changes)
}

func (c *DocCache) get(m *Message, ws bool) map[string]any {
	if c == nil {
		return m.document(ws)
	}
	if e, ok := c.byStep[m.Step]; ok && e.fresh(m, ws) {
		return e.doc
	}
	if c.byStep == nil {
		c.byStep = map[int]docEntry{}
	}
	doc := m.document(ws)
	c.byStep[m.Step] = docEntry{at: m.At, ws: ws, commit: m.Commit, err: m.Error, chg: m.Changes, doc: doc}
	return doc
}
