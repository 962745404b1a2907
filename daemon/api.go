package daemon

import (
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// apiHost is the fixed Host of every request on the socket; the server
// refuses others, so nothing reached through a proxy or browser can talk
// to it.
const apiHost = "nerve.sock"

// versionHeader carries the daemon's and the client's version.
const versionHeader = "Nerve-Version"

// StartRequest asks the daemon to start a local thread.
type StartRequest struct {
	// Workflow is a name found in the configured workflow directories;
	// File is a definition file (absolute path). One of the two.
	Workflow string         `json:"workflow,omitempty"`
	File     string         `json:"file,omitempty"`
	Input    map[string]any `json:"input,omitempty"`
	// Workdir is where adapters run (NERVE_WORKDIR): the caller's cwd.
	// Empty (or a turn's scratch directory): each turn works in the new
	// thread's own scratch directory, outside NERVE_HOME.
	Workdir string `json:"workdir"`
	// Workspace overrides the definition's workspace for this thread
	// (run --repo, --base, --branch); nil keeps the definition's.
	Workspace *WorkspaceRequest `json:"workspace,omitempty"`
	// Parent, set when an agent starts a workflow from inside a turn
	// (NERVE_THREAD), links the new thread to that local thread as its
	// child.
	Parent string `json:"parent,omitempty"`
	// ParentTurn is the step of that turn (NERVE_STEP), for the parent's
	// trace.
	ParentTurn int `json:"parent_turn,omitempty"`
	// Priority orders a cloud thread's turns in its Khala's queue (run
	// --priority); the CLI refuses it for a local thread.
	Priority *int `json:"priority,omitempty"`
}

// WorkspaceRequest is a local thread's workspace as the CLI asks for it:
// a path in a git repository (default: the definition's, else Workdir), a
// revision to start from (default: HEAD there), and a branch name
// (default nerve/WORKFLOW/thread-N). The daemon resolves and checks them
// when it starts the thread; a bad one is a usage error.
type WorkspaceRequest struct {
	Repo   string `json:"repo,omitempty"`
	Base   string `json:"base,omitempty"`
	Branch string `json:"branch,omitempty"`
	// Taken are the shared remote's branches a cloud thread's default
	// branch must not be (api.StartWorkspace.Taken): the CLI's, for Khala.
	Taken []string `json:"-"`
}

// NotifyRequest is an agent's notice for a thread's trace (the MCP tool
// notify).
type NotifyRequest struct {
	// Thread is the thread's full ref: code-review#thread-3, or
	// origin/code-review#thread-9 for a remote thread this agent runs a
	// turn of.
	Thread string `json:"thread"`
	// Step is the turn's (NERVE_STEP); 0 names no turn of a local thread,
	// and any turn this agent holds of a remote one.
	Step    int    `json:"step,omitempty"`
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Status is what `daemon status` shows.
type Status struct {
	PID       int         `json:"pid"`
	Home      string      `json:"home"`
	Version   string      `json:"version"`
	StartedAt time.Time   `json:"started_at"`
	Config    ConfigState `json:"config"`
	Capacity  int         `json:"capacity"`
	// ClaimedSlots are capacity slots held by claimed remote turns.
	ClaimedSlots int `json:"claimed_slots"`
	// Outbox is the number of responses not yet delivered.
	Outbox      int          `json:"outbox"`
	Threads     int          `json:"running_threads"`
	ActiveTurns []ActiveTurn `json:"active_turns"`
	Senses      []SenseState `json:"senses"`
	// Adapters are those with a daily cap, spend today or turns since
	// the daemon started: spent/cap, and whether each is held back.
	Adapters []AdapterStatus `json:"adapters"`
	// Sandbox is where turns run, as daemon.sandbox resolves here.
	Sandbox SandboxStatus `json:"sandbox"`
}

// SandboxStatus is daemon.sandbox as configured and what it means on this
// machine.
type SandboxStatus struct {
	// Mode is daemon.sandbox (or NERVE_DAEMON_SANDBOX): auto, bwrap, none.
	Mode string `json:"mode"`
	// Effective is what turns get: bwrap or none (an adapter's own
	// sandbox: may differ).
	Effective string `json:"effective"`
	// Network is sandbox.network: open, allow-list or none.
	Network string `json:"network"`
	// Warning says why turns run unsandboxed though the mode is auto, or
	// why they fail (bwrap where it does not work); null otherwise.
	Warning *string `json:"warning"`
}

// AdapterStatus is one adapter's spend today against its caps, and its
// back-off. Caps and times are null when there are none.
type AdapterStatus struct {
	Name string `json:"name"`
	// Day is the UTC day the spend is of.
	Day         string   `json:"day"`
	SpentUSD    float64  `json:"spent_usd"`
	SpentTokens int64    `json:"spent_tokens"`
	DailyUSD    *float64 `json:"daily_usd"`
	DailyTokens *int64   `json:"daily_tokens"`
	// State is "ok", "capped" (no turn starts until 00:00 UTC) or
	// "paused" (after rate limits; local turns wait).
	State string `json:"state"`
	// Reason says why it is capped or paused; null when ok.
	Reason      *string    `json:"reason"`
	PausedUntil *time.Time `json:"paused_until"`
	// RateLimited counts its rate-limited answers in a row.
	RateLimited  int `json:"rate_limited_in_a_row"`
	WaitingTurns int `json:"waiting_turns"`
	// Turns counts the turns that ended since the daemon started, by
	// outcome (ok, failed, rate_limited, budget).
	Turns map[string]int64 `json:"turns"`
}

// ConfigState says which nerve.yaml is in force and how its last reload went.
type ConfigState struct {
	File       string    `json:"file,omitempty"`
	LoadedAt   time.Time `json:"loaded_at"`
	LastReload string    `json:"last_reload,omitempty"` // "ok" or the error
}

// SenseState is one configured sense.
type SenseState struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	State string `json:"state"`
}

// ActiveTurn is an adapter process running now.
type ActiveTurn struct {
	Thread    string    `json:"thread"`
	Step      int       `json:"step"`
	Role      string    `json:"role"`
	Adapter   string    `json:"adapter"`
	StartedAt time.Time `json:"started_at"`
	// Detections raised while it runs ("stall: no output for 1m0s").
	Detections []string `json:"detections"`
}

// apiError is the error body of every failed request.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Hint    string `json:"hint,omitempty"`
		// Field names the input a bad answer got wrong ("meta",
		// "content"), for a form to show the error beside it.
		Field string `json:"field,omitempty"`
	} `json:"error"`
}

// Error codes of the control API.
const (
	codeUsage    = "usage"     // bad request, bad input, bad definition: exit 2
	codeNotFound = "not_found" // unknown workflow or thread: exit 2
	codeConflict = "conflict"  // e.g. cancelling an ended thread
	codeInternal = "internal"
	codeShutdown = "shutting_down"
)

// publicThread strips what callers need not see (the stored definition).
func publicThread(t *workflow.Thread) *workflow.Thread {
	c := *t
	c.Source = nil
	return &c
}
