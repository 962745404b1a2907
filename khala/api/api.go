package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// ClaimRequest asks for up to Max turns, waiting up to Wait for one
// (POST /v1/turns/claim).
type ClaimRequest struct {
	Max       int      `json:"max"`
	Wait      Wait     `json:"wait"`
	Workflows []string `json:"workflows,omitempty"`
	Roles     []string `json:"roles,omitempty"`
	// Repos is what repositories the claiming machine fetches (nil: any,
	// as before machines said): Khala hands it no turn of a thread whose
	// workspace repository it would refuse.
	Repos *RepoFilter `json:"repos,omitempty"`
}

// RepoFilter names the repositories a claiming machine fetches: those
// matching one of Globs (path.Match), or, without globs, those the
// threads' own workflows declare.
type RepoFilter struct {
	Globs []string `json:"globs,omitempty"`
}

// Wait is a long poll's wait: "30s" on the wire, or a number of seconds.
type Wait time.Duration

// MarshalJSON writes the wait as a Go duration string.
func (d Wait) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts "30s" or a number of seconds.
func (d *Wait) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("wait %q: want a duration such as 30s", s)
		}
		*d = Wait(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errors.New("wait: want a duration such as \"30s\" or a number of seconds")
	}
	if secs > 1e6 {
		secs = 1e6 // clamped below anyway; avoids overflow
	}
	*d = Wait(secs * float64(time.Second))
	return nil
}

// CodeNotHolder is the error code of the 403 for a claim presented by an
// agent other than the one its turn was leased to: the turn is another
// agent's, and asking again cannot change that. Any other 403 (a proxy's,
// a person's right to answer) is not this.
const CodeNotHolder = "not_holder"

// Khala's codes of a 404 and a 400 that refuse a request for good: the
// thread or turn named does not exist (not_found), or the request itself
// is malformed (bad_request, invalid_input). A 404 or 400 with no code (a
// proxy's, while Khala is redeployed) says neither.
const (
	CodeNotFound     = "not_found"
	CodeBadRequest   = "bad_request"
	CodeInvalidInput = "invalid_input"
)

// Turn is one leased turn: everything an agent needs to run it.
type Turn struct {
	Turn         string    `json:"turn"`
	Claim        string    `json:"claim"`
	Thread       string    `json:"thread"`
	Workflow     string    `json:"workflow"`
	Role         string    `json:"role"`
	Prompt       string    `json:"prompt"`
	Instruction  string    `json:"instruction"`
	Step         int       `json:"step"`
	Attempt      int       `json:"attempt"`
	LeaseExpires time.Time `json:"lease_expires_at"`
	// Workspace is the thread's git workspace when it has one: the turn
	// works in a worktree at Head (its branch pushed with a lease on it).
	Workspace *workflow.Workspace `json:"workspace,omitempty"`
	// Parallel says the turn is one of a round of several of a workspace
	// thread: its commit goes to its turn ref, and a merge turn (Merge)
	// merges the round when its last answer is in.
	Parallel bool   `json:"parallel,omitempty"`
	Merge    *Merge `json:"merge,omitempty"`
}

// Response is a turn's answer (POST /v1/turns/{turn}/response).
type Response struct {
	Claim   string                 `json:"claim"`
	Content string                 `json:"content"`
	Meta    any                    `json:"meta,omitempty"`
	Error   *workflow.MessageError `json:"error,omitempty"`
	Adapter string                 `json:"adapter,omitempty"`
	Usage   *usage.Usage           `json:"usage,omitempty"`
	// Commit is the thread branch's commit after the turn (pushed with a
	// lease before the answer is sent), Changes what the turn changed;
	// both only for a thread with a workspace.
	Commit  string            `json:"commit,omitempty"`
	Changes *workflow.Changes `json:"changes,omitempty"`
	// Step is, in a merge turn's answer with a merge error, the step whose
	// commit did not merge (its message gets the error).
	Step int `json:"step,omitempty"`
}

// StartThread starts a thread (POST /v1/workflows/{name}/threads).
type StartThread struct {
	Input     map[string]any  `json:"input"`
	Webhook   string          `json:"webhook,omitempty"`
	Workspace *StartWorkspace `json:"workspace,omitempty"`
	// Parent makes the new thread a child of a running thread of the same
	// Khala: an agent inside a turn of Parent.Thread starts it.
	Parent *StartParent `json:"parent,omitempty"`
	// Priority orders the thread's turns in the queue: claims take
	// higher priority first, then oldest first. nil: 0.
	Priority *int `json:"priority,omitempty"`
}

// Priority bounds: a thread's priority is an integer from MinPriority to
// MaxPriority; 0 is the default, a negative one is background work.
const (
	MinPriority = -100
	MaxPriority = 100
)

// CheckPriority accepts no priority or one within the bounds.
func CheckPriority(p *int) error {
	if p != nil && (*p < MinPriority || *p > MaxPriority) {
		return fmt.Errorf("priority %d: want an integer from %d to %d (default 0; higher is claimed first)", *p, MinPriority, MaxPriority)
	}
	return nil
}

// StartParent is a child thread's parent: its thread id, and the step
// waiting for the child (0: none).
type StartParent struct {
	Thread string `json:"thread"`
	Step   int    `json:"step,omitempty"`
	// Turn is the step of the turn inside which an agent starts the child
	// (its NERVE_STEP), for the parent's trace.
	Turn int `json:"turn,omitempty"`
}

// StartWorkspace is a new thread's workspace: the repository every serving
// agent fetches from and pushes to (default: the definition's), the commit
// it starts from (a full id: the CLI resolves a revision before it starts
// the thread), and its branch (default nerve/WORKFLOW/thread-N).
//
// Taken lists branches the shared remote has that the default could be
// (the CLI reads them from its mirror: Khala runs no git); a default one
// of them names is not taken again: the thread's branch is the next free
// name, nerve/WORKFLOW/thread-N-2, -3, ... (workflow.FreeBranch).
type StartWorkspace struct {
	Repo   string   `json:"repo,omitempty"`
	Base   string   `json:"base"`
	Branch string   `json:"branch,omitempty"`
	Taken  []string `json:"taken,omitempty"`
}

// TurnEvents reports what an agent noticed while it runs a turn it holds
// (POST /v1/turns/{turn}/events): the claim is checked as a heartbeat's
// is, and each event goes into the thread's trace.
type TurnEvents struct {
	Claim  string      `json:"claim"`
	Events []TurnEvent `json:"events"`
}

// TurnEvent is one event of a running turn: a detection (Status is its
// kind: stall, errors, malformed) or an agent's notify (Status is its
// level: info, warning, blocking).
type TurnEvent struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Adapter string `json:"adapter,omitempty"`
}

// EventNotify is an agent's notice in a thread's trace, sent from inside a
// turn (the MCP tool notify); its Status is the level. Khala passes it to
// the thread's webhook.
const EventNotify = "notify"

// Notify levels: blocking means the agent cannot go on without a person.
const (
	NotifyInfo     = "info"
	NotifyWarning  = "warning"
	NotifyBlocking = "blocking"
)

// MaxNotifyMessage bounds a notify's message, as Khala bounds every turn
// event's (4 KiB).
const MaxNotifyMessage = 4096

// CheckNotify says what is wrong with a notify's level and message, or nil.
func CheckNotify(level, message string) error {
	switch level {
	case NotifyInfo, NotifyWarning, NotifyBlocking:
	default:
		return fmt.Errorf("level %q: want info, warning or blocking", level)
	}
	switch {
	case len(bytes.TrimSpace([]byte(message))) == 0:
		return errors.New("message is empty: say what the thread's people should know")
	case len(message) > MaxNotifyMessage:
		return fmt.Errorf("message is %d bytes, over the limit of %d", len(message), MaxNotifyMessage)
	}
	return nil
}
