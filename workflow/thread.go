package workflow

import (
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Thread statuses.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Thread is one run of a workflow.
type Thread struct {
	ID       string         `json:"id"`
	Workflow string         `json:"workflow"`
	Status   string         `json:"status"`
	Input    map[string]any `json:"input"`
	// Step is the number of the last turn assigned.
	Step int `json:"step"`
	// Pending are the turns assigned and not yet answered: what a restart
	// runs again.
	Pending []Turn `json:"pending,omitempty"`
	Result  any    `json:"result,omitempty"`
	Error   string `json:"error,omitempty"`
	Workdir string `json:"workdir,omitempty"`
	// Workspace is the thread's git workspace; null when it has none.
	Workspace *Workspace `json:"workspace"`
	// Parent links a child thread to its parent; nil for a top-level one.
	Parent *Parent `json:"parent,omitempty"`
	// Depth is 0 for a top-level thread, its parent's + 1 for a child.
	Depth int `json:"depth"`
	// Priority orders a Khala thread's turns in the queue (higher first);
	// a child has its parent's. Local threads keep 0.
	Priority int `json:"priority"`
	// Defs is the directory of the definition file a local thread was
	// started from: where its children's workflows are looked for first.
	Defs string `json:"defs,omitempty"`
	// Children counts its child threads by status; filled when a thread is
	// shown, not stored.
	Children *Children `json:"children,omitempty"`
	// Waiting lists its human turns waiting for an answer; filled when a
	// thread is shown, not stored.
	Waiting []Waiting `json:"waiting,omitempty"`
	// Source is the definition the thread was started with, moderator
	// inlined: a thread finishes under the rules it started with.
	Source []byte `json:"source,omitempty"`
	// Usage sums the usage of the thread's messages, counted once as each
	// answer is recorded: what limits.max_cost_usd and max_tokens bound.
	// A child thread's totals are to be merged into its parent's here.
	Usage     usage.Totals `json:"usage"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
	EndedAt   time.Time    `json:"ended_at,omitzero"`
}

// Ended reports whether the thread has reached a final status.
func (t *Thread) Ended() bool { return t.Status != StatusRunning }

// Turn is one step the moderator assigned to a role.
type Turn struct {
	Step        int    `json:"step"`
	Role        string `json:"role"`
	Instruction string `json:"instruction"`
	// Workflow and Input make the turn a child thread of that workflow
	// (Role is then the step's label); see IsChild.
	Workflow string         `json:"workflow,omitempty"`
	Input    map[string]any `json:"input,omitempty"`
}

// Message is what a turn produced, in the shape the moderator sees.
type Message struct {
	Step        int           `json:"step"`
	Role        string        `json:"role"`
	Agent       string        `json:"agent"`
	Content     string        `json:"content"`
	Meta        any           `json:"meta"`
	Error       *MessageError `json:"error"`
	At          time.Time     `json:"at"`
	Instruction string        `json:"instruction,omitempty"`
	Adapter     string        `json:"adapter,omitempty"`
	Usage       *usage.Usage  `json:"usage,omitempty"`
	// Commit is the thread branch's commit after this turn, when its
	// thread has a workspace; Changes what the turn changed. Omitted when
	// empty, so a message of a thread without a workspace is stored as
	// before; the moderator sees null.
	Commit  string   `json:"commit,omitempty"`
	Changes *Changes `json:"changes,omitempty"`
	// Child is the ref of the child thread whose result this message is;
	// ChildUsage the child's totals, which count in this thread's (a
	// rollup by model or agent counts the child's own messages instead).
	Child      string        `json:"child,omitempty"`
	ChildUsage *usage.Totals `json:"child_usage,omitempty"`
}

// MessageError says why a turn's answer is not what was asked for. The
// moderator sees it and decides what to do.
type MessageError struct {
	// Kind is "adapter" (the CLI failed), "timeout", "extract" (the
	// structured output did not match the role's meta schema), "merge" or
	// "workspace" (ErrorKindMerge, ErrorKindWorkspace).
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Event is one entry of a thread's trace.
type Event struct {
	Seq     uint64    `json:"seq"`
	At      time.Time `json:"at"`
	Type    string    `json:"type"`
	Thread  string    `json:"thread"`
	Step    int       `json:"step,omitempty"`
	Role    string    `json:"role,omitempty"`
	Agent   string    `json:"agent,omitempty"`
	Adapter string    `json:"adapter,omitempty"`
	Message string    `json:"message,omitempty"`
	Status  string    `json:"status,omitempty"`
	// Turn, Claim and Attempt trace a turn of a Khala queue through its
	// leases: which lease an agent held when it acted.
	Turn    string `json:"turn,omitempty"`
	Claim   string `json:"claim,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// Event types.
const (
	EventThreadStarted = "thread.started"
	EventTurnStarted   = "turn.started"
	EventTurnAnswered  = "turn.answered"
	EventTurnFailed    = "turn.failed"
	EventThreadEnded   = "thread.ended"
	EventDetection     = "detection"
	EventResumed       = "thread.resumed"
)

// State is the document the moderator is evaluated against.
type State struct {
	Workflow string         `json:"workflow"`
	Thread   string         `json:"thread"`
	Input    map[string]any `json:"input"`
	Step     int            `json:"step"`
	Messages []Message      `json:"messages"`
	Last     *Message       `json:"last"`
	// Workspace is the thread's, when it has one: then every message in
	// the document has commit and changes (null when absent).
	Workspace *Workspace `json:"workspace,omitempty"`
	// Usage is the thread's totals so far, its children's included as its
	// budget counts them (a thread's usage in `workflow run --json`).
	Usage usage.Totals `json:"usage"`

	docs *DocCache
}

// WithCache returns s building its moderator document through c.
func (s State) WithCache(c *DocCache) State {
	s.docs = c
	return s
}

// NewState builds the moderator's input from a thread and its messages
// (in step order).
func NewState(t *Thread, msgs []Message) State {
	s := State{Workflow: t.Workflow, Thread: t.ID, Input: t.Input, Step: t.Step, Messages: msgs, Workspace: t.Workspace, Usage: t.Usage}
	if s.Messages == nil {
		s.Messages = []Message{}
	}
	if s.Input == nil {
		s.Input = map[string]any{}
	}
	if len(msgs) > 0 {
		s.Last = &msgs[len(msgs)-1]
	}
	return s
}
