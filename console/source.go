package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// Source is what the console reads and does. Khala implements it over its
// storage; `nerve console` over the daemon's socket API.
type Source interface {
	// Threads lists threads newest first, one page of them, with the
	// counts of every status (of all threads, unfiltered by status).
	Threads(ctx context.Context, f ThreadFilter) (*ThreadPage, error)
	// Thread returns one thread with its messages, trace and open turns,
	// or an error wrapping ErrNotFound.
	Thread(ctx context.Context, id string) (*ThreadDetail, error)
	// Follow calls fn with each event of thread id after seq, as it is
	// committed, until the thread ends, fn fails or ctx ends.
	Follow(ctx context.Context, id string, after uint64, fn func(workflow.Event) error) error
	// Workflows lists the definitions threads can be started from.
	Workflows(ctx context.Context) ([]Workflow, error)
	// Agents lists the agents serving turns.
	Agents(ctx context.Context) ([]Agent, error)
	// Queue lists open turns, oldest first.
	Queue(ctx context.Context) ([]QueuedTurn, error)
	// Usage totals tokens and cost by q.By from the usage rollup: the
	// report `nerve usage` and GET /v1/usage give for the same question.
	Usage(ctx context.Context, q usage.Query) (*usage.Report, error)
	// Inbox lists the human turns waiting for person.
	Inbox(ctx context.Context, person string) ([]InboxItem, error)
	// Answer answers a human turn as person. A bad field is a
	// *FieldError, shown next to the field.
	Answer(ctx context.Context, person string, a AnswerForm) error
}

// ErrNotAvailable is what a Source answers for a feature it does not have
// yet; the page says what it will show.
var ErrNotAvailable = errors.New("not available yet")

// ErrNotFound is an unknown thread or workflow.
var ErrNotFound = errors.New("not found")

// FieldError is a bad value in a form: Field names the input.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// Thread statuses the list filters by. Waiting (a thread waiting for a
// person) is counted by sources that know human turns.
var Statuses = []string{workflow.StatusRunning, "waiting", workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled}

// ThreadFilter selects a page of threads; zero fields select all.
type ThreadFilter struct {
	Workflow string
	Status   string
	Page     int // 1-based
	PerPage  int
}

// Window is where the page f asks for lies in a list of n threads:
// [from, to), and whether more follow it.
func (f ThreadFilter) Window(n int) (from, to int, more bool) {
	from = min((f.Page-1)*f.PerPage, n)
	to = min(from+f.PerPage, n)
	return from, to, n > to
}

// Summary is t as the threads list shows it; waiting: a human turn of it
// waits for a person, so a running thread shows as waiting.
func Summary(t *workflow.Thread, waiting bool) ThreadSummary {
	status := t.Status
	if status == workflow.StatusRunning && waiting {
		status = "waiting"
	}
	return ThreadSummary{ID: t.ID, Workflow: t.Workflow, Status: status,
		Error: t.Error, Step: t.Step, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// Counts are threads by status. Waiting threads (a human turn waits for a
// person) are running ones too, counted in both. Waiting is -1 when the
// source cannot tell.
type Counts struct {
	Running, Waiting, Completed, Failed, Cancelled int
}

// ThreadPage is one page of the list.
type ThreadPage struct {
	Threads []ThreadSummary
	// More says another page follows.
	More   bool
	Counts Counts
	// Workflows names every workflow that has threads, sorted (the
	// filter's choices, whatever page is shown).
	Workflows []string
}

// ThreadSummary is a row of the list.
type ThreadSummary struct {
	ID, Workflow, Status, Error string
	Ref                         string // a child's full ref, as its parent records it
	Step                        int
	CreatedAt, UpdatedAt        time.Time
}

// ThreadDetail is everything a thread's page shows.
type ThreadDetail struct {
	Thread   workflow.Thread
	Messages []workflow.Message
	Events   []workflow.Event
	Turns    []QueuedTurn // open ones
	// Children are threads this one started; nil when the source has no
	// notion of them yet (the page says so). A child on another server
	// has an empty ID and its Ref.
	Children []ThreadSummary
	// Waiting are its human turns waiting for a person.
	Waiting []InboxItem
}

// Workflow is a definition as its page shows it.
type Workflow struct {
	Name, Description, Binding string
	Roles                      []Role
	Source                     string // the definition, moderator inlined
	UpdatedAt                  time.Time
	UpdatedBy                  string
	Err                        string // why it does not load
}

// Role is one role of a workflow.
type Role struct {
	Name, Adapter string
	Meta          string // the meta schema as JSON; "" for none
}

// Agent is one agent serving turns. A zero LastSeen or a negative
// Capacity is not known.
type Agent struct {
	Name       string
	LastSeen   time.Time
	TurnsHeld  int
	Capacity   int
	EnrolledAt time.Time
}

// QueuedTurn is an open turn.
type QueuedTurn struct {
	Turn, Thread, Workflow, Role, State, Agent string
	Step, Attempt                              int
	Priority                                   int // claims take higher first
	QueuedAt, LeaseExpires                     time.Time
	Idle                                       bool // waited past its idle limit
}

// InboxItem is a human turn waiting for an answer, or an agent's blocking
// notice (Notice, its message; Agent, who sent it), listed until the
// thread's next turn starts. Prompt is the role's own, for a person to
// read: never the prompt composed for an agent.
type InboxItem struct {
	Thread, Workflow, Role, Prompt, Instruction string
	Notice, Agent                               string
	Step                                        int
	Meta                                        string // the role's meta schema as JSON
	// AnsweredBy are the people who may answer; empty: any person.
	AnsweredBy []string
	Since      time.Time
}

// MayAnswer says whether person may answer the turn.
func (i InboxItem) MayAnswer(person string) bool {
	return len(i.AnsweredBy) == 0 || slices.Contains(i.AnsweredBy, person)
}

// NewInboxItem is a waiting turn as the console shows it.
func NewInboxItem(w workflow.Waiting) InboxItem {
	it := InboxItem{Thread: w.Thread, Workflow: w.Workflow, Role: w.Role, Prompt: w.RolePrompt, Instruction: w.Instruction,
		Step: w.Step, AnsweredBy: w.AnsweredBy, Since: w.Since}
	if w.Meta != nil {
		b, _ := json.MarshalIndent(w.Meta, "", "  ")
		it.Meta = string(b)
	}
	return it
}

// AnswerForm is a person's answer to a human turn.
type AnswerForm struct {
	Thread  string
	Step    int
	Content string
	Meta    string // JSON, "" for none
}
