package khalabolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb/internal/shared"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Stored records. A turn is a binary head (what claims, heartbeats and
// the sweeper change) followed by its JSON body (what never changes), and
// a thread is its version followed by its JSON: the writer, which every
// request waits for, checks and changes leases and versions without
// decoding JSON, and copies bodies encoded before the transaction.

// turnHead is the changing part of a turn.
type turnHead struct {
	Rev          uint64
	State        string
	Attempt      int
	Lease        time.Duration
	FirstQueued  time.Time
	QueuedAt     time.Time
	ClaimedAt    time.Time
	LeaseExpires time.Time
	IdleAt       time.Time
	Claim        string
	Agent        string
	// Priority is in the head, not the body, because the queue's index
	// key holds it: the writer moves a turn's index entries from the head
	// alone.
	Priority int
}

// turnBody is the JSON of what a turn keeps from its queueing on.
type turnBody struct {
	ID          string        `json:"turn"`
	Thread      string        `json:"thread"`
	Workflow    string        `json:"workflow"`
	Step        int           `json:"step"`
	Role        string        `json:"role"`
	Instruction string        `json:"instruction"`
	Prompt      string        `json:"prompt,omitempty"`
	MaxAttempts int           `json:"max_attempts"`
	Idle        time.Duration `json:"idle,omitempty"`
	Child       string        `json:"child,omitempty"`
	Repo        string        `json:"repo,omitempty"`
	Declared    bool          `json:"repo_declared,omitempty"`
}

// Turn head formats: 2 added the priority; a format 1 head (written
// before priorities existed) reads as priority 0.
const (
	turnFormat1 = 1
	turnFormat  = 2
)

var (
	stateCodes = map[string]byte{khaladb.TurnQueued: 1, khaladb.TurnClaimed: 2, khaladb.TurnAnswered: 3, khaladb.TurnCancelled: 4,
		khaladb.TurnWaiting: 5, khaladb.TurnChild: 6}
	stateNames = []string{"", khaladb.TurnQueued, khaladb.TurnClaimed, khaladb.TurnAnswered, khaladb.TurnCancelled,
		khaladb.TurnWaiting, khaladb.TurnChild}

	errBadRecord = errors.New("malformed record")
)

func headOf(t *khaladb.Turn) turnHead {
	return turnHead{Rev: t.Rev, State: t.State, Attempt: t.Attempt, Lease: t.Lease, FirstQueued: t.FirstQueued, QueuedAt: t.QueuedAt,
		ClaimedAt: t.ClaimedAt, LeaseExpires: t.LeaseExpires, IdleAt: t.IdleAt, Claim: t.Claim, Agent: t.Agent, Priority: t.Priority}
}

// encodeTurnBody is the JSON body of t; a closed turn drops its prompt,
// which no one is served any more.
func encodeTurnBody(t *khaladb.Turn) ([]byte, error) {
	b := turnBody{ID: t.ID, Thread: t.Thread, Workflow: t.Workflow, Step: t.Step, Role: t.Role,
		Instruction: t.Instruction, Prompt: t.Prompt, MaxAttempts: t.MaxAttempts, Idle: t.Idle, Child: t.Child,
		Repo: t.Repo, Declared: t.RepoDeclared}
	if !t.Open() {
		b.Prompt = ""
	}
	return json.Marshal(b)
}

// appendHead encodes h.
func appendHead(dst []byte, h turnHead) []byte {
	dst = append(dst, turnFormat, stateCodes[h.State])
	dst = binary.BigEndian.AppendUint64(dst, h.Rev)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Attempt))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Lease))
	for _, t := range []time.Time{h.FirstQueued, h.QueuedAt, h.ClaimedAt, h.LeaseExpires, h.IdleAt} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(shared.Nanos(t)))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(int32(h.Priority)))
	dst = append(dst, byte(len(h.Claim)))
	dst = append(dst, h.Claim...)
	dst = append(dst, byte(len(h.Agent)))
	return append(dst, h.Agent...)
}

// turnValue is a stored turn: head then body.
func turnValue(h turnHead, body []byte) []byte {
	return append(appendHead(make([]byte, 0, 68+len(h.Claim)+len(h.Agent)+len(body)), h), body...)
}

// headSize is the fixed part of a format 1 head: format, state, rev,
// attempt, lease, times; format 2 adds the priority (4 bytes).
const headSize = 2 + 8 + 4 + 8 + 5*8

// splitTurn parses a stored turn's head; body aliases v.
func splitTurn(v []byte) (turnHead, []byte, error) {
	var h turnHead
	if len(v) < headSize+2 || (v[0] != turnFormat && v[0] != turnFormat1) || int(v[1]) >= len(stateNames) {
		return h, nil, errBadRecord
	}
	h.State = stateNames[v[1]]
	h.Rev = binary.BigEndian.Uint64(v[2:])
	h.Attempt = int(binary.BigEndian.Uint32(v[10:]))
	h.Lease = time.Duration(binary.BigEndian.Uint64(v[14:]))
	ts := []*time.Time{&h.FirstQueued, &h.QueuedAt, &h.ClaimedAt, &h.LeaseExpires, &h.IdleAt}
	for i, t := range ts {
		*t = shared.FromNanos(int64(binary.BigEndian.Uint64(v[22+8*i:])))
	}
	rest := v[headSize:]
	if v[0] == turnFormat {
		if len(rest) < 4+2 {
			return h, nil, errBadRecord
		}
		h.Priority, rest = int(int32(binary.BigEndian.Uint32(rest))), rest[4:]
	}
	for _, s := range []*string{&h.Claim, &h.Agent} {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return h, nil, errBadRecord
		}
		*s, rest = string(rest[1:1+int(rest[0])]), rest[1+int(rest[0]):]
	}
	return h, rest, nil
}

// decodeTurn reads a stored turn.
func decodeTurn(v []byte) (khaladb.Turn, error) {
	h, body, err := splitTurn(v)
	if err != nil {
		return khaladb.Turn{}, err
	}
	var b turnBody
	if err := json.Unmarshal(body, &b); err != nil {
		return khaladb.Turn{}, fmt.Errorf("turn body: %w", err)
	}
	return khaladb.Turn{ID: b.ID, Thread: b.Thread, Workflow: b.Workflow, Step: b.Step, Role: b.Role, Instruction: b.Instruction,
		Prompt: b.Prompt, State: h.State, Attempt: h.Attempt, MaxAttempts: b.MaxAttempts, Lease: h.Lease, Idle: b.Idle,
		Claim: h.Claim, Agent: h.Agent, FirstQueued: h.FirstQueued, QueuedAt: h.QueuedAt, ClaimedAt: h.ClaimedAt,
		LeaseExpires: h.LeaseExpires, IdleAt: h.IdleAt, Rev: h.Rev, Child: b.Child, Priority: h.Priority,
		Repo: b.Repo, RepoDeclared: b.Declared}, nil
}

// threadValue is a stored thread: its version, then its JSON.
func threadValue(version uint64, body []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(body)), version), body...)
}

func threadVersion(v []byte) (uint64, error) {
	if len(v) < 8 {
		return 0, errBadRecord
	}
	return binary.BigEndian.Uint64(v), nil
}

func decodeThread(v []byte, t *khaladb.Thread) error {
	ver, err := threadVersion(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(v[8:], t); err != nil {
		return fmt.Errorf("thread record: %w", err)
	}
	t.Version = ver
	return nil
}
