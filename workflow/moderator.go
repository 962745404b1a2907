package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/recolabs/gnata"
)

// moderatorTimeout bounds one evaluation: a moderator is a pure function of
// a small document and must not stall a thread.
const moderatorTimeout = 2 * time.Second

// Moderator is a compiled JSONata expression. It is compiled once per
// definition and safe for concurrent use.
type Moderator struct {
	src  string
	expr *gnata.Expression
}

// CompileModerator compiles a JSONata moderator.
func CompileModerator(src string) (*Moderator, error) {
	e, err := gnata.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("does not compile: %s", oneLine(err.Error()))
	}
	return &Moderator{src: src, expr: e}, nil
}

// Source returns the JSONata text.
func (m *Moderator) Source() string { return m.src }

// Eval evaluates the moderator against state and returns its raw output.
func (m *Moderator) Eval(ctx context.Context, s State) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, moderatorTimeout)
	defer cancel()
	doc := s.document()
	w := newEvalWatch(ctx)
	out, err := m.expr.Eval(w, doc)
	if err != nil {
		if w.over {
			return nil, errEvalMemory
		}
		return nil, m.locate(w, doc, err)
	}
	// Plain maps, slices and nil, whatever gnata uses inside.
	return gnata.NormalizeValue(out), nil
}

// Decision is what the moderator decided, checked.
type Decision struct {
	Turns  []Turn // the next turns; several run in parallel
	Done   bool
	Result any
	// HasResult tells a done without result from a result of null.
	HasResult bool
	Fail      string
}

// ResultFor is a done thread's result: the moderator's result, else the
// last message's meta, else its content. msgs are in step order.
func (d Decision) ResultFor(msgs []Message) any {
	if d.HasResult || len(msgs) == 0 {
		return d.Result
	}
	last := msgs[len(msgs)-1]
	if last.Meta != nil {
		return last.Meta
	}
	return last.Content
}

// RoutingError is a thread failed by its moderator's own fault: an
// evaluation error, output that is none of the documented shapes, a role
// that does not exist, or too many steps.
type RoutingError struct {
	Workflow string
	Reason   string
}

func (e *RoutingError) Error() string {
	return fmt.Sprintf("workflow %s: moderator %s", e.Workflow, e.Reason)
}

// Route evaluates the moderator of d for the thread and checks its output
// against the definition: roles exist, instructions are strings, max_steps
// holds. A moderator that fails, or answers anything else, yields a
// *RoutingError, which fails the thread.
func Route(ctx context.Context, d *Definition, s State) (Decision, error) {
	out, err := d.Moderator.Eval(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		return Decision{}, &RoutingError{d.Name, "failed: " + bounded(oneLine(err.Error()), maxFailBytes)}
	}
	if reason := checkOutput(out); reason != "" {
		return Decision{}, &RoutingError{d.Name, reason}
	}
	dec, reason := decide(d, out)
	if reason != "" {
		return Decision{}, &RoutingError{d.Name, reason}
	}
	if n := len(dec.Turns); n > 0 && s.Step+n > d.Limits.MaxSteps {
		return Decision{}, &RoutingError{d.Name, fmt.Sprintf("exceeded max_steps (%d): step %d asked for %d more turn(s)", d.Limits.MaxSteps, s.Step, n)}
	}
	for i := range dec.Turns {
		dec.Turns[i].Step = s.Step + i + 1
	}
	return dec, nil
}

func decide(d *Definition, out any) (Decision, string) {
	switch v := out.(type) {
	case map[string]any:
		if _, ok := v["done"]; ok {
			if b, _ := v["done"].(bool); !b {
				return Decision{}, fmt.Sprintf("returned done: %s; done must be true", short(v["done"]))
			}
			res, has := v["result"]
			return Decision{Done: true, Result: res, HasResult: has}, ""
		}
		if f, ok := v["fail"]; ok {
			s, _ := f.(string)
			if strings.TrimSpace(s) == "" {
				return Decision{}, fmt.Sprintf("returned fail: %s; fail must be a non-empty reason", short(f))
			}
			if len(s) > maxFailBytes {
				return Decision{}, fmt.Sprintf("returned a fail reason of %d bytes, more than %d: %s", len(s), maxFailBytes, short(s))
			}
			return Decision{Fail: s}, ""
		}
		t, why := turnOf(d, v)
		if why != "" {
			return Decision{}, why
		}
		return Decision{Turns: []Turn{t}}, ""
	case []any:
		if len(v) == 0 {
			return Decision{}, "returned an empty array; return turns, done or fail"
		}
		dec := Decision{}
		for i, item := range v {
			obj, ok := item.(map[string]any)
			if !ok {
				return Decision{}, fmt.Sprintf("returned an array whose item %d is %s, not a turn", i, short(item))
			}
			t, why := turnOf(d, obj)
			if why != "" {
				return Decision{}, fmt.Sprintf("item %d: %s", i, why)
			}
			dec.Turns = append(dec.Turns, t)
		}
		return dec, ""
	case nil:
		return Decision{}, "returned nothing; return {role, instruction}, {workflow, input}, an array of them, {done: true} or {fail: reason}"
	default:
		return Decision{}, fmt.Sprintf("returned %s; want {role, instruction}, an array of them, {done: true} or {fail: reason}", short(out))
	}
}

func turnOf(d *Definition, v map[string]any) (Turn, string) {
	if _, ok := v["workflow"]; ok {
		return childOf(v)
	}
	role, ok := v["role"].(string)
	if !ok {
		return Turn{}, fmt.Sprintf("returned %s: no role (want {role, instruction}, {done: true} or {fail: reason})", short(v))
	}
	if _, ok := d.Roles[role]; !ok {
		return Turn{}, fmt.Sprintf("named role %q, which %s does not define (roles: %s)", role, d.Name, strings.Join(slices.Sorted(maps.Keys(d.Roles)), ", "))
	}
	instr := ""
	if x, ok := v["instruction"]; ok && x != nil {
		s, ok := x.(string)
		if !ok {
			return Turn{}, fmt.Sprintf("gave role %q an instruction that is %s, not a string", role, short(x))
		}
		if len(s) > maxInstructionBytes {
			return Turn{}, fmt.Sprintf("gave role %q an instruction of %d KiB, more than %d KiB", role, len(s)>>10, maxInstructionBytes>>10)
		}
		instr = s
	}
	return Turn{Role: role, Instruction: instr}, ""
}

// short renders a value for an error message.
func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
