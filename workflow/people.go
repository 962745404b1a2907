package workflow

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultMaxSpawnDepth bounds how deep children may nest when nerve.yaml
// (daemon.max_spawn_depth) or Khala (--max-spawn-depth) sets nothing.
const DefaultMaxSpawnDepth = 3

// EventTurnWaiting is a human turn that waits for a person's answer;
// EventChildStarted a child thread a turn started (Message: its ref).
const (
	EventTurnWaiting  = "turn.waiting"
	EventChildStarted = "child.started"
	EventChildEnded   = "child.ended"
)

// Parent links a child thread to the step of its parent that waits for
// it. A child an agent started from inside a turn has Step 0: nothing
// waits for it, it is only counted and cancelled with the parent.
type Parent struct {
	// Ref is the parent thread's full ref (REMOTE/WORKFLOW#thread-N on a
	// remote, WORKFLOW#thread-N locally).
	Ref    string `json:"ref"`
	Thread string `json:"thread"`
	// Step is the parent's step that waits for this child (a moderator's
	// child turn); 0: none does, an agent started it from inside a turn.
	Step int `json:"step,omitempty"`
	// Turn is the step of the turn whose agent started it (NERVE_STEP),
	// for the parent's trace; 0 when unknown or when Step is set.
	Turn int `json:"turn,omitempty"`
}

// ChildEventStep is the step the parent's trace shows a child's start
// at: the step waiting for it, else the turn whose agent started it.
func (p *Parent) ChildEventStep() int {
	if p.Step > 0 {
		return p.Step
	}
	return p.Turn
}

// IsChild reports whether the turn starts a child thread rather than
// running a role.
func (t Turn) IsChild() bool { return t.Workflow != "" }

// IsHuman reports whether the role's turns are answered by a person.
func (d *Definition) IsHuman(role string) bool {
	r := d.Roles[role]
	return r != nil && r.Human
}

// Answerers names who may answer a human role's turn (answered_by);
// empty means anyone with a person token.
func (d *Definition) Answerers(role string) []string {
	if r := d.Roles[role]; r != nil {
		return r.AnsweredBy
	}
	return nil
}

// DepthError is a child refused because it would nest deeper than the
// allowed depth.
type DepthError struct {
	Depth, Max int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("child thread refused: it would be at depth %d, beyond max_spawn_depth %d", e.Depth, e.Max)
}

// ExitCode makes a refused start a failure of the work, not of its usage.
func (e *DepthError) ExitCode() int { return 1 }

// CheckDepth refuses a child of a thread at parentDepth when it would be
// deeper than max (0: DefaultMaxSpawnDepth).
func CheckDepth(parentDepth, max int) error {
	if max <= 0 {
		max = DefaultMaxSpawnDepth
	}
	if parentDepth+1 > max {
		return &DepthError{Depth: parentDepth + 1, Max: max}
	}
	return nil
}

// AnswerError is a person's answer that does not fit the turn: its meta
// does not match the role's schema, or it is empty. Nothing is recorded.
type AnswerError struct {
	Reason string
	// Field is what the answer got wrong, for a form to show it there:
	// "meta", "content", or "" for neither.
	Field string
}

func (e *AnswerError) Error() string { return e.Reason }

// ExitCode: a bad answer is the user's input, like a bad flag.
func (e *AnswerError) ExitCode() int { return 2 }

// CheckAnswer checks a person's answer to a turn of role before anything
// is recorded: a role with a meta schema needs meta that matches it, and an
// answer says something.
func (d *Definition) CheckAnswer(role, content string, meta any) error {
	r := d.Roles[role]
	if r == nil {
		return &AnswerError{Reason: fmt.Sprintf("workflow %s has no role %q", d.Name, role)}
	}
	if !r.Human {
		return &AnswerError{Reason: fmt.Sprintf("role %q of %s is played by an agent, not a person", role, d.Name)}
	}
	if r.schema != nil {
		if meta == nil {
			return &AnswerError{Reason: fmt.Sprintf("role %q wants meta matching its schema: pass --meta JSON", role), Field: "meta"}
		}
		if err := validate(r.schema, numbersToFloat(meta)); err != nil {
			return &AnswerError{Reason: "meta " + schemaNoise().ReplaceAllString(err.Error(), ""), Field: "meta"}
		}
	}
	if strings.TrimSpace(content) == "" && meta == nil {
		return &AnswerError{Reason: "the answer is empty: give text, --file or --meta", Field: "content"}
	}
	return nil
}

// schemaNoise is the validator's preamble naming its in-memory schema
// URL, which means nothing to a person answering.
var schemaNoise = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`jsonschema validation failed with '[^']*' - `) })

var personRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`) })

// CheckPersonName checks a person's name (Khala's `user add NAME`, a
// role's answered_by).
func CheckPersonName(name string) error {
	if !personRE().MatchString(name) {
		return fmt.Errorf("person name %q: use 1-63 lowercase letters, digits, '-', '_' and '.', starting with a letter or digit", name)
	}
	return nil
}

// childOf reads a moderator's child-thread turn: {"workflow": NAME,
// "input": {...}, "role"?: LABEL}. The label names the step's message (the
// workflow's name without one).
func childOf(v map[string]any) (Turn, string) {
	name, ok := v["workflow"].(string)
	if !ok || !nameRE().MatchString(name) {
		return Turn{}, fmt.Sprintf("returned a child turn whose workflow is %s; want a workflow name", short(v["workflow"]))
	}
	t := Turn{Workflow: name, Role: name}
	if x, ok := v["input"]; ok && x != nil {
		in, ok := x.(map[string]any)
		if !ok {
			return Turn{}, fmt.Sprintf("gave child workflow %q an input that is %s, not an object", name, short(x))
		}
		t.Input = in
	}
	if x, ok := v["role"]; ok && x != nil {
		label, ok := x.(string)
		if !ok || strings.TrimSpace(label) == "" {
			return Turn{}, fmt.Sprintf("gave child workflow %q a role label that is %s, not a name", name, short(x))
		}
		t.Role = label
	}
	return t, ""
}

// checkPeople checks who plays a role: a person (human, answered_by) or
// an adapter.
func checkPeople(binding, p string, r *Role, bad func(field, format string, a ...any)) {
	switch {
	case r.Human && r.Adapter != "":
		bad(p+".adapter", "a human role is answered by a person and has no adapter; remove adapter or human")
	case !r.Human && binding == BindingLocal && r.Adapter == "":
		bad(p+".adapter", "a local workflow's role needs an adapter (or human: true for a person's turn)")
	}
	if len(r.AnsweredBy) == 0 {
		return
	}
	switch {
	case !r.Human:
		bad(p+".answered_by", "only a human role has answered_by; add human: true")
	case binding != BindingCloud:
		bad(p+".answered_by", "names Khala people, so it belongs to cloud workflows; locally the daemon's user answers")
	default:
		for _, name := range r.AnsweredBy {
			if err := CheckPersonName(name); err != nil {
				bad(p+".answered_by", "%s", err)
			}
		}
	}
}

// startEvent is the trace's record of a turn assigned: started for an
// agent's turn and a child's, waiting for a person's.
func startEvent(d *Definition, t *Thread, turn Turn, agent string, at time.Time) Event {
	ev := Event{Type: EventTurnStarted, Thread: t.ID, Step: turn.Step, Role: turn.Role, Agent: agent, At: at}
	switch r := d.Roles[turn.Role]; {
	case turn.IsChild():
		ev.Message = "child workflow " + turn.Workflow
	case r != nil && r.Human:
		ev.Type, ev.Message = EventTurnWaiting, "waiting for "+WhoAnswers(r.AnsweredBy)
	case r != nil:
		ev.Adapter = r.Adapter
	}
	return ev
}

// WhoAnswers names who may answer a human turn, for people reading it.
func WhoAnswers(answeredBy []string) string {
	if len(answeredBy) == 0 {
		return "a person"
	}
	return strings.Join(answeredBy, " or ")
}

// Waiting is a human turn waiting for a person's answer: what `nerve
// inbox`, a thread object's `waiting` and Khala's GET /v1/inbox show.
type Waiting struct {
	// Thread is the thread's id (thread-N); Ref, when known, its full
	// ref (REMOTE/WORKFLOW#thread-N, WORKFLOW#thread-N locally).
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	Ref      string `json:"ref,omitempty"`
	// Turn is Khala's turn id (the answer endpoint's {turn}); "" locally.
	Turn        string `json:"turn,omitempty"`
	Step        int    `json:"step"`
	Role        string `json:"role"`
	Prompt      string `json:"prompt"`
	Instruction string `json:"instruction"`
	// RolePrompt is the role's own prompt, what a person is shown with
	// the instruction: Prompt is composed for an agent (the meta schema
	// as a fenced block to end with, how to read the thread).
	RolePrompt string    `json:"role_prompt,omitempty"`
	AnsweredBy []string  `json:"answered_by"`
	Meta       any       `json:"meta_schema"`
	Since      time.Time `json:"since"`
}

// Answer is a person's answer to a human turn.
type Answer struct {
	Content string `json:"content"`
	Meta    any    `json:"meta,omitempty"`
}

// Children summarises a thread's child threads: how many are in each
// status, and their refs in the order they started.
type Children struct {
	Counts map[string]int `json:"counts"`
	Refs   []string       `json:"refs"`
}

// String is the summary `workflow logs` prints: "2 running, 3 completed".
func (c *Children) String() string {
	var parts []string
	for _, st := range []string{StatusRunning, StatusCompleted, StatusFailed, StatusCancelled} {
		if n := c.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return strings.Join(parts, ", ")
}

// Error kinds of a child turn's message: the child failed or was
// cancelled (the moderator decides), or it could not start at all (too
// deep, an unknown workflow, bad input), which fails the parent.
const (
	ErrorKindChild = "child"
	ErrorKindSpawn = "spawn"
)

// spawnRefused is why a child of the round that just answered could not
// start, "" when all did: the moderator asked for something that cannot
// be, so the thread fails with that reason.
func spawnRefused(t *Thread, msgs []Message) string {
	for _, p := range t.Pending {
		for i := len(msgs) - 1; i >= 0; i-- {
			if m := msgs[i]; m.Step == p.Step && m.Error != nil && m.Error.Kind == ErrorKindSpawn {
				return m.Error.Message
			}
		}
	}
	return ""
}
