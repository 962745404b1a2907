package khaladb

import (
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"

	"github.com/nerve-agents/nerve/workflow"
)

// Storage is everything Khala keeps. The embedded backend is a bbolt file
// (khalabolt); a PostgreSQL backend serving several stateless replicas
// (khalapg) implements the same contract, which khaladbtest checks:
//
//   - Every method that returns nil has committed durably: the server
//     answers 200/201 only after that.
//   - Claim hands each queued turn to exactly one caller, whichever
//     replica the callers talk to (bbolt: one writer; PostgreSQL: FOR
//     UPDATE SKIP LOCKED).
//   - UpdateThread serialises one thread's changes: fn runs on a current
//     view, and its change is committed only if nothing it read has moved
//     (bbolt: a per-thread lock plus version checks; PostgreSQL: SELECT
//     ... FOR UPDATE on the thread row, or a write checked against the
//     thread's version and its turns' revisions). fn may run more than
//     once, and only the run whose change is committed counts.
//   - Changed is the only state allowed to live in one process's memory:
//     wake-up hints that may be lost or spurious. Callers re-check on a
//     timer, so a lost hint costs latency, never a turn.
type Storage interface {
	// AddEnrollToken stores a new enrollment token (its hash only).
	AddEnrollToken(ctx context.Context, t EnrollToken) error
	// Enroll consumes one use of the enrollment token whose hash is
	// enroll and registers a, atomically. Errors: ErrUnauthorized (with
	// a reason), ErrNameTaken.
	Enroll(ctx context.Context, enroll Hash, a Agent) error
	// AgentByToken returns the agent whose token hashes to h, or
	// ErrUnauthorized.
	AgentByToken(ctx context.Context, h Hash) (Agent, error)
	// Agents lists the enrolled agents by name, each with the turns
	// leased to it and when it was last seen.
	Agents(ctx context.Context) ([]AgentStatus, error)
	// RevokeAgent deletes an agent: its token stops working at once on
	// every replica (no cache of it survives). Errors: ErrNotFound.
	RevokeAgent(ctx context.Context, name string) error
	// SawAgents records when agents (by name) were last seen, keeping a
	// later time already stored; unknown names are skipped. A server
	// calls it about once a minute for all the agents it saw, never per
	// request.
	SawAgents(ctx context.Context, seen map[string]time.Time) error

	// AddPerson stores a person (token hash only). Errors: ErrNameTaken.
	AddPerson(ctx context.Context, p Person) error
	// RemovePerson deletes a person; their token stops working at once.
	// Errors: ErrNotFound.
	RemovePerson(ctx context.Context, name string) error
	// People lists people by name.
	People(ctx context.Context) ([]Person, error)
	// PersonByToken returns the person whose token hashes to h, or
	// ErrUnauthorized. It is never answered from a cache: a removed
	// person's token must stop at once on every replica.
	PersonByToken(ctx context.Context, h Hash) (Person, error)

	// PutWorkflow publishes a definition: its record and its source,
	// which is kept by content hash for the threads started from it. A
	// new record is owned by w.Owner (empty: w.UpdatedBy); an existing one
	// keeps its owner (OwnedBy), and when w.Owner is set and is not that
	// owner nothing is written: ErrNotOwner. An empty w.Owner publishes
	// over anyone's (the admin's and legacy tokens' right).
	PutWorkflow(ctx context.Context, w WorkflowRecord, source []byte) (created bool, err error)
	Workflow(ctx context.Context, name string) (WorkflowRecord, error)
	Workflows(ctx context.Context) ([]WorkflowRecord, error)
	// Source returns a definition's source by content hash.
	Source(ctx context.Context, hash string) ([]byte, error)

	// NextThreadID reserves a thread id; a reservation never used leaves
	// a gap or is handed out again (the id was never seen), never a
	// duplicate of a created thread.
	NextThreadID(ctx context.Context) (string, error)
	// CreateThread stores a new thread with its first turns and events.
	CreateThread(ctx context.Context, c *ThreadChange) error
	// Thread returns a thread with its messages and open turns, or
	// ErrNotFound.
	Thread(ctx context.Context, id string) (*ThreadView, error)
	// Turn returns any turn, open or closed, or ErrNotFound.
	Turn(ctx context.Context, id string) (Turn, error)
	// Threads lists threads, newest first.
	Threads(ctx context.Context, q ThreadQuery) ([]Thread, error)
	// UpdateThread applies fn's change to thread id, serialised with every
	// other change of that thread. fn returning (nil, nil) changes
	// nothing; an error from fn is returned as is.
	UpdateThread(ctx context.Context, id string, fn func(*ThreadView) (*ThreadChange, error)) error
	// Events returns up to limit events of a thread with Seq > after.
	Events(ctx context.Context, thread string, after uint64, limit int) ([]workflow.Event, error)

	// Claim leases up to q.Max queued turns to q.Agent, higher Priority
	// first, then oldest first (FirstQueued), and records a turn.started
	// event for each. Both orders are an index's: a claim never sorts the
	// queue.
	Claim(ctx context.Context, q ClaimQuery) ([]Turn, error)
	// Heartbeat makes the lease of turn held under claim by agent run at
	// least a lease past now, writing the expiry only when it would end
	// sooner (HeartbeatExpiry, lease.go): at most one durable write per
	// turn per lease period. It returns the turn with the stored expiry.
	// A turn whose thread ended returns it with State cancelled and the
	// lease unchanged. Errors: ErrNotFound, ErrClaimLost, ErrNotHolder
	// (the claim is another agent's: nothing is written).
	Heartbeat(ctx context.Context, turn, claim, agent string, now time.Time) (Turn, error)
	// Due returns turns whose lease expired or whose idle time passed by
	// now (at most limit), and the earliest future deadline (zero: none).
	Due(ctx context.Context, now time.Time, limit int) ([]DueTurn, time.Time, error)
	// WaitingTurns returns the human turns waiting for a person's answer
	// (TurnWaiting), oldest first.
	WaitingTurns(ctx context.Context) ([]Turn, error)
	// Usage returns the usage rollup's rows f selects, kept as answers
	// are written (ThreadChange.Spent), one per key.
	Usage(ctx context.Context, f usage.Filter) ([]usage.Row, error)
	// Stats counts what /metrics reports as gauges.
	Stats(ctx context.Context) (Stats, error)

	// ClaimWebhooks leases up to max deliveries due by now for lease (so a
	// crashed deliverer's are retried), and returns the next due time.
	ClaimWebhooks(ctx context.Context, now time.Time, lease time.Duration, max int) ([]Webhook, time.Time, error)
	// FinishWebhook deletes a delivery (retryAt zero: delivered or given
	// up) or schedules its next attempt.
	FinishWebhook(ctx context.Context, id uint64, attempts int, retryAt time.Time, lastErr string) error

	// Changed returns a channel closed after the next change of topic:
	// TopicQueue, TopicWebhooks, or ThreadTopic(id).
	Changed(topic string) <-chan struct{}

	// Ping reports whether the storage can be reached (GET /v1/health):
	// a replica whose database is down says so, and is taken out of a
	// load balancer's rotation until it is back.
	Ping(ctx context.Context) error

	Close() error
}

// Wake-up topics.
const (
	TopicQueue    = "queue"    // a turn was queued
	TopicWebhooks = "webhooks" // a webhook delivery was added or rescheduled
)

// ThreadTopic is the topic of a thread's events.
func ThreadTopic(id string) string { return "thread/" + id }

// Storage errors. Backends return these (wrapped or not) so the HTTP layer
// maps them to the same status whatever the backend.
var (
	ErrNotFound     = errors.New("not found")
	ErrUnauthorized = errors.New("unauthorized")
	ErrNameTaken    = errors.New("name taken")
	ErrClaimLost    = errors.New("claim lost")
	ErrThreadEnded  = errors.New("thread ended")
	ErrConflict     = errors.New("too many concurrent changes; retry")
	ErrClosed       = errors.New("storage closed")
	ErrLocked       = errors.New("database is locked by another process")
	// ErrUnavailable says the database cannot be reached right now: the
	// request may be retried (503).
	ErrUnavailable = errors.New("database unavailable")
	// ErrNotHolder refuses a claim presented by an agent other than the
	// one it was leased to: claim ids are in every thread's trace, so a
	// claim alone proves nothing. The holder's lease is untouched.
	ErrNotHolder = errors.New("not the holder")
	// ErrNotOwner refuses publishing over a workflow someone else owns.
	ErrNotOwner = errors.New("not the owner")
)

// ThreadQuery selects threads; zero fields select all.
type ThreadQuery struct {
	Workflow string
	Status   string
	Limit    int
}

// ClaimQuery is one agent's request for turns.
type ClaimQuery struct {
	Agent     string
	Max       int
	Workflows []string // empty: any
	Roles     []string // empty: any
	Repos     *RepoFilter
	Now       time.Time
}

// RepoFilter is what repositories a claiming agent fetches (nil: any).
// A turn without a workspace passes; one with passes when its repository
// matches one of Globs (path.Match), or, with no Globs, when its
// workflow declares that repository (Turn.RepoDeclared). A serving
// machine so never claims a thread it would refuse to fetch.
type RepoFilter struct {
	Globs []string
}

// Admits reports whether a claim with f may get a turn of repository repo
// (declared: the workflow declares it).
func (f *RepoFilter) Admits(repo string, declared bool) bool {
	if f == nil || repo == "" {
		return true
	}
	if len(f.Globs) == 0 {
		return declared
	}
	for _, g := range f.Globs {
		if ok, _ := path.Match(g, repo); ok {
			return true
		}
	}
	return false
}

// Key is the filter as one string, for claims that must share it.
func (f *RepoFilter) Key() string {
	if f == nil {
		return "*"
	}
	return "=" + strings.Join(f.Globs, "\x00")
}

// Due kinds.
const (
	DueExpired = "expired" // a lease ran out
	DueIdle    = "idle"    // a turn waited unclaimed past its idle limit
	DueChild   = "child"   // a child turn's thread is to be checked on
)

// DueTurn is work for the sweeper.
type DueTurn struct {
	Kind   string
	Turn   string
	Thread string
	Claim  string // the lease that expired (DueExpired)
}

// Stats are the storage gauges.
type Stats struct {
	Queued  int // turns waiting for an agent
	Claimed int // turns leased to an agent
	Running int // threads not ended
	Waiting int // human turns waiting for a person
}

// SharedWrites is what a Storage that writes concurrent claims and changes
// in shared statements (khalapg) may also offer: how many it wrote and in
// how many statements, for a server's metrics. A server asks for it with
// a type assertion, naming no backend.
type SharedWrites interface {
	SharedWrites() WriteStats
}

// WriteStats count claims and changes made from claims' views (most
// answers), and the statements that wrote each.
type WriteStats struct {
	Claims, ClaimStatements   int64
	Changes, ChangeStatements int64
}
