package khala

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/workflow"
)

// Error codes of the {"error": {"code", "message"}} body.
const (
	codeBadRequest   = api.CodeBadRequest
	codeUnauthorized = "unauthorized"
	codeNotFound     = api.CodeNotFound
	codeMethod       = "method_not_allowed"
	codeTooLarge     = "too_large"
	codeNameTaken    = "name_taken"
	codeClaimLost    = "claim_lost"
	codeNotHolder    = api.CodeNotHolder
	codeThreadEnded  = "thread_ended"
	codeInvalidWF    = "invalid_workflow"
	codeInvalidIn    = api.CodeInvalidInput
	codeUnavailable  = "unavailable"
	codeTimeout      = "timeout"
	codeInternal     = "internal"
)

// engineStatus answers each kind of the engine's refusals.
var engineStatus = map[engine.Kind]int{
	engine.KindBadRequest: http.StatusBadRequest,
	engine.KindNotFound:   http.StatusNotFound,
	engine.KindForbidden:  http.StatusForbidden,
	engine.KindConflict:   http.StatusConflict,
	engine.KindTooDeep:    http.StatusUnprocessableEntity,
}

// apiError is an error with the status and code it is answered with.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, codeBadRequest, fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &apiError{http.StatusNotFound, codeNotFound, fmt.Sprintf(format, a...)}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// Hint says what to do next, when the server knows (a bad input).
		Hint string `json:"hint,omitempty"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

// fail answers err with the status its kind calls for. Internal errors
// are logged and answered without detail.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var ee *engine.Error
	var ie *workflow.InputError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.status, ae.code, ae.msg)
	case errors.As(err, &ee):
		writeError(w, engineStatus[ee.Kind], ee.Code, ee.Msg)
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("request body is larger than %d bytes", mbe.Limit))
	case errors.As(err, &ie):
		var b errorBody
		b.Error.Code, b.Error.Message, b.Error.Hint = codeInvalidIn, ie.Error(), ie.Hint()
		writeJSON(w, http.StatusBadRequest, b)
	case errors.Is(err, khaladb.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, err.Error())
	case errors.Is(err, khaladb.ErrUnauthorized):
		writeError(w, http.StatusUnauthorized, codeUnauthorized, err.Error())
	case errors.Is(err, khaladb.ErrNameTaken):
		writeError(w, http.StatusConflict, codeNameTaken, err.Error())
	case errors.Is(err, khaladb.ErrClaimLost):
		writeError(w, http.StatusConflict, codeClaimLost, "the claim is no longer the holder of this turn: drop the result")
	case errors.Is(err, khaladb.ErrNotHolder):
		writeError(w, http.StatusForbidden, codeNotHolder, err.Error())
	case errors.Is(err, khaladb.ErrThreadEnded):
		writeError(w, http.StatusConflict, codeThreadEnded, err.Error())
	case errors.Is(err, khaladb.ErrConflict), errors.Is(err, khaladb.ErrClosed):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, err.Error())
	case errors.Is(err, khaladb.ErrUnavailable):
		// The storage logged the cause once; the client needs only to
		// retry (the cause may name internal hosts).
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the database is unavailable; retry shortly")
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, codeTimeout, "the request took too long; retry")
	case errors.Is(err, context.Canceled):
		// The client left; nobody reads this.
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "request cancelled")
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "internal error; see the server log")
	}
}

// decodeJSON reads one JSON value from the body into v. An empty body is
// allowed only when emptyOK (the zero request). Unknown fields are
// ignored so newer clients keep working; wrong types are refused.
func decodeJSON(r *http.Request, v any, emptyOK bool) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var ae *apiError
		switch {
		case errors.As(err, &mbe), errors.As(err, &ae):
			return err
		case errors.Is(err, io.EOF):
			if emptyOK {
				return nil
			}
			return badRequest("request body is empty; want a JSON object")
		default:
			return badRequest("malformed JSON: %s", jsonErr(err))
		}
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("malformed JSON: data after the request object")
	}
	return nil
}

// jsonErr words a decoding error for a client: the field and the type.
func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, kindOf(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("want %s, not %s", kindOf(te.Type.Kind().String()), te.Value)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func kindOf(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "a number"
	case k == "struct", k == "map":
		return "an object"
	case k == "slice", k == "array":
		return "an array"
	case k == "bool":
		return "a boolean"
	}
	return "a " + k
}
