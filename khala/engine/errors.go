package engine

import (
	"errors"
	"fmt"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Kind is what sort of refusal an Error is; the HTTP shell picks the
// status for it. Storage's own kinds (khaladb.ErrClaimLost, ErrNotHolder,
// ErrThreadEnded, ...) pass through as they are.
type Kind int

const (
	KindBadRequest Kind = iota + 1 // the request is malformed or does not fit
	KindNotFound                   // what it names does not exist
	KindForbidden                  // the caller may not do it
	KindConflict                   // the state it needs is not there
	KindTooDeep                    // a child past the spawn depth
)

// Error codes the engine's refusals carry (the API's {"error": {"code"}}).
const (
	CodeNotWaiting    = "not_waiting"
	CodeInvalidAnswer = "invalid_answer"
	CodeForbidden     = "forbidden"
	CodeTooDeep       = "too_deep"
)

// Error is a refusal, with what to tell the caller.
type Error struct {
	Kind Kind
	Code string
	Msg  string
	// Field is the answer's field that does not fit its role
	// (CodeInvalidAnswer), for a form to point at.
	Field string
}

func (e *Error) Error() string { return e.Msg }

func badRequest(format string, a ...any) error {
	return &Error{Kind: KindBadRequest, Code: api.CodeBadRequest, Msg: fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &Error{Kind: KindNotFound, Code: api.CodeNotFound, Msg: fmt.Sprintf(format, a...)}
}

func forbidden(format string, a ...any) error {
	return &Error{Kind: KindForbidden, Code: CodeForbidden, Msg: fmt.Sprintf(format, a...)}
}

func conflict(code, format string, a ...any) error {
	return &Error{Kind: KindConflict, Code: code, Msg: fmt.Sprintf(format, a...)}
}

// errTurnClosed says the turn a request names is not open: unknown,
// answered or cancelled. The caller reads the closed turn to tell which;
// closed is final, so that read needs no serialising.
var errTurnClosed = errors.New("turn not open")

// ErrCallerGone is a claim's: its caller left before it could be told.
// Whatever was claimed for it went back to the queue.
var ErrCallerGone = errors.New("the claiming agent left")

// notHolder refuses another agent's claim on turn id: it is not a lost
// lease, so the holder keeps it (403, not 409).
func notHolder(id string) error {
	return fmt.Errorf("%w: turn %s is held by another agent; only the agent it was leased to may answer, heartbeat or release it",
		khaladb.ErrNotHolder, id)
}
