package khaladb

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"

	"github.com/nerve-agents/nerve/workflow"
)

// Hash is the SHA-256 of a token: all a backend ever stores of one.
type Hash [32]byte

// Agent is an enrolled agent.
type Agent struct {
	Name       string    `json:"name"`
	Token      Hash      `json:"token"`
	EnrolledAt time.Time `json:"enrolled_at"`
	// Scopes are what the token may do (khala/scopes.go); none: an agent
	// enrolled before tokens had scopes, which keeps what it could do.
	Scopes []string `json:"scopes,omitempty"`
}

// AgentStatus is an enrolled agent as GET /v1/agents lists it.
type AgentStatus struct {
	Name       string
	EnrolledAt time.Time
	Scopes     []string // none: the legacy set (Agent.Scopes)
	// LastSeen is the latest time SawAgents recorded (zero: none yet).
	LastSeen time.Time
	// Held are the turns leased to it (claimed), in thread and step
	// order; nil: none.
	Held []string
}

// EnrollToken lets its holder enroll up to Uses agents until ExpiresAt
// (zero: never).
type EnrollToken struct {
	Hash      Hash      `json:"hash"`
	Uses      int       `json:"uses"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	// Scopes are given to the agents it enrolls (none: the legacy set).
	Scopes []string `json:"scopes,omitempty"`
}

// Person is someone who answers human turns (nerve khala user add). A
// person's token is distinct from an agent's: it answers, it never claims.
type Person struct {
	Name    string    `json:"name"`
	Token   Hash      `json:"token"`
	AddedAt time.Time `json:"added_at"`
	// Scopes are what the token may do; none: a person added before
	// tokens had scopes (answer and console).
	Scopes []string `json:"scopes,omitempty"`
}

// WorkflowRecord is a published definition. Everything else about it is
// read from its source, parsed once per hash.
type WorkflowRecord struct {
	Name       string    `json:"name"`
	SourceHash string    `json:"source_hash"`
	UpdatedAt  time.Time `json:"updated_at"`
	UpdatedBy  string    `json:"updated_by"`
	// Owner is who first published it (empty in records older than
	// owners: UpdatedBy stands in, see OwnedBy). PutWorkflow keeps it.
	Owner string `json:"owner,omitempty"`
}

// OwnedBy is the workflow's owner: Owner, or for a record published
// before owners were kept, its last publisher.
func (w WorkflowRecord) OwnedBy() string {
	if w.Owner != "" {
		return w.Owner
	}
	return w.UpdatedBy
}

// Thread is a thread as Khala keeps it. Pending holds the turns assigned
// and not yet answered; the queue state of each is in its Turn.
type Thread struct {
	workflow.Thread
	SourceHash string `json:"source_hash"`
	Webhook    string `json:"webhook,omitempty"`
	Initiator  string `json:"initiator,omitempty"`
	// Children are the child threads started from this one, in the
	// order they were started (see ChildLink).
	Children []ChildLink `json:"children,omitempty"`
	// Round is the parallel round of a workspace thread in progress, and
	// StepErrors the errors its merge put on stored messages (khala/engine/merge.go).
	Round      *Round      `json:"round,omitempty"`
	StepErrors []StepError `json:"step_errors,omitempty"`
	// Noticed is when an agent last sent a blocking notice, zeroed once a
	// turn started after it has answered: which threads' traces the
	// inbox reads for notices that still stand.
	Noticed time.Time `json:"noticed,omitzero"`
	// Version grows with every UpdateThread commit: the optimistic check
	// that keeps a stale view from overwriting a newer state.
	Version uint64 `json:"version"`
}

// ChildLink is a child thread as its parent keeps it: Status is the
// child's as last seen by the parent (the child's own record has the last
// word); Step is the parent's step that waits for it (0: none, an agent
// started it from inside a turn).
type ChildLink struct {
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	Step     int    `json:"step,omitempty"`
	Status   string `json:"status"`
}

// Turn states. Only a queued turn is ever claimed: a waiting turn is a
// person's, a child turn waits for its child thread.
const (
	TurnQueued    = "queued"
	TurnClaimed   = "claimed"
	TurnAnswered  = "answered"
	TurnCancelled = "cancelled" // its thread ended first
	TurnWaiting   = "waiting"   // a human turn waiting for a person's answer
	TurnChild     = "child"     // a child thread runs for it (Child)
)

// Turn is one queued step: what an agent claims. Its limits are copied
// from the definition when it is queued, so the queue needs no parsing.
type Turn struct {
	ID          string        `json:"turn"`
	Thread      string        `json:"thread"`
	Workflow    string        `json:"workflow"`
	Step        int           `json:"step"`
	Role        string        `json:"role"`
	Instruction string        `json:"instruction"`
	Prompt      string        `json:"prompt"`
	State       string        `json:"state"`
	Attempt     int           `json:"attempt"`
	MaxAttempts int           `json:"max_attempts"`
	Lease       time.Duration `json:"lease"`
	Idle        time.Duration `json:"idle,omitempty"`
	Claim       string        `json:"claim,omitempty"`
	Agent       string        `json:"agent,omitempty"`
	// Priority is its thread's: claims take higher priority first.
	Priority int `json:"priority,omitempty"`
	// Repo is its thread's workspace repository ("" without one), and
	// RepoDeclared whether the thread's workflow declares that very
	// repository: what a claim's Repos filter matches (ClaimQuery).
	Repo         string `json:"repo,omitempty"`
	RepoDeclared bool   `json:"repo_declared,omitempty"`
	// FirstQueued orders the queue within a priority: a re-queued turn
	// keeps its place.
	FirstQueued  time.Time `json:"first_queued"`
	QueuedAt     time.Time `json:"queued_at"`
	ClaimedAt    time.Time `json:"claimed_at,omitzero"`
	LeaseExpires time.Time `json:"lease_expires,omitzero"`
	// IdleAt is when an unclaimed turn raises idle; zero once raised.
	IdleAt time.Time `json:"idle_at,omitzero"`
	// Child is a child turn's thread (thread-N); for a child turn,
	// LeaseExpires is when the sweeper next checks on that thread.
	Child string `json:"child,omitempty"`
	// Rev grows with every write of the turn (claims and heartbeats
	// included), so UpdateThread can tell a turn moved under it.
	Rev uint64 `json:"rev"`
	// Head is its thread's workspace as the claim that returned the turn
	// read it, from a store whose claims read the thread anyway
	// (PostgreSQL's); nil when the claim did not. Never stored.
	Head *ThreadHead `json:"-"`
}

// ThreadHead is what a claimed turn's agent needs of its thread: the
// workspace (nil: none) and the parallel round in progress, if any.
type ThreadHead struct {
	Workspace *workflow.Workspace
	Round     *Round
}

// Open reports whether the turn still waits for an answer.
func (t *Turn) Open() bool {
	switch t.State {
	case TurnQueued, TurnClaimed, TurnWaiting, TurnChild:
		return true
	}
	return false
}

// ThreadView is a thread with everything needed to change it.
type ThreadView struct {
	Thread   Thread
	Messages []workflow.Message // in step order
	// Turns are the open ones (queued or claimed), in step order: a
	// closed turn never changes again, so no change needs it.
	Turns []Turn
}

// Turn returns the thread's open turn with id, or nil.
func (v *ThreadView) Turn(id string) *Turn {
	for i := range v.Turns {
		if v.Turns[i].ID == id {
			return &v.Turns[i]
		}
	}
	return nil
}

// ThreadChange is one atomic change of a thread. Thread is the new record
// (the backend sets Version); Turns are upserted, each checked against the
// Rev it was read with; Messages, Events and Webhooks are appended; Spent
// is added to the usage rollup (one row per answer with usage).
type ThreadChange struct {
	Thread   Thread
	Turns    []Turn
	Messages []workflow.Message
	Events   []workflow.Event
	Webhooks []Webhook
	Spent    []usage.Row
}

// Webhook is one delivery of the outbox.
type Webhook struct {
	ID       uint64         `json:"id"`
	URL      string         `json:"url"`
	Payload  WebhookPayload `json:"payload"`
	Attempts int            `json:"attempts"`
	NextAt   time.Time      `json:"next_at"`
	LastErr  string         `json:"last_error,omitempty"`
	Created  time.Time      `json:"created"`
}

// WebhookPayload is what the initiator's URL receives.
type WebhookPayload struct {
	Event    string `json:"event"`
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	Status   string `json:"status"`
	Result   any    `json:"result,omitempty"`
	Error    string `json:"error,omitempty"`
	Step     int    `json:"step,omitempty"`
	Role     string `json:"role,omitempty"`
	Turn     string `json:"turn,omitempty"`
	// Workspace is the thread's branch and head when it ended (nil: it
	// has none, or the event is not the end).
	Workspace *workflow.Workspace `json:"workspace,omitempty"`
	// Level and Message are a notify event's.
	Level   string `json:"level,omitempty"`
	Message string `json:"message,omitempty"`
}

// TurnID names step of thread: thread-7.3.
func TurnID(thread string, step int) string { return thread + "." + strconv.Itoa(step) }

// ParseThreadID returns N of thread-N.
func ParseThreadID(id string) (uint64, bool) {
	if !workflow.IsThreadID(id) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "thread-"), 10, 64)
	return n, err == nil
}

// ParseTurnID splits thread-N.S.
func ParseTurnID(id string) (thread string, n uint64, step int, ok bool) {
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return "", 0, 0, false
	}
	thread = id[:i]
	n, ok = ParseThreadID(thread)
	s, err := strconv.Atoi(id[i+1:])
	if !ok || err != nil || s < 1 || strconv.Itoa(s) != id[i+1:] {
		return "", 0, 0, false
	}
	return thread, n, s, true
}

// ThreadID formats thread-N.
func ThreadID(n uint64) string { return fmt.Sprintf("thread-%d", n) }

// SameHash compares two token hashes in constant time.
func SameHash(a, b Hash) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }

// NewClaimID returns a lease id: 128 random bits, the capability to answer
// the turn.
func NewClaimID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Unreadable is what a listing shows for a stored thread whose record
// cannot be decoded (one written before the moderator's output was
// bounded, nested too deep to read back): the thread, failed, saying why,
// so that one bad record fails that thread's own reads, never the list.
// workflowName is "" where the backend keeps it only in the record.
func Unreadable(id, workflowName string, err error) Thread {
	return Thread{Thread: workflow.Thread{ID: id, Workflow: workflowName, Status: workflow.StatusFailed,
		Error: "its stored record cannot be read: " + err.Error()}}
}
