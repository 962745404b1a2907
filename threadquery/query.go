package threadquery

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// Query selects messages of a thread.
type Query struct {
	// Ref is REF#THREAD; empty means the turn's thread.
	Ref  string
	Role string
	Last int
	// Since is an RFC 3339 time or a duration ago (10m).
	Since string
	Step  int
	// Flags names the filters as the CLI's flags (--since) in errors.
	Flags bool
}

// name is how errors name filter field.
func (q Query) name(field string) string {
	if q.Flags {
		return "--" + field
	}
	return field
}

// Turn is what a process inside a turn is given of its thread.
type Turn struct {
	Thread   string // NERVE_THREAD: the thread's full ref
	Snapshot string // NERVE_THREAD_SNAPSHOT: its messages as JSONL
	// Socket: the turn has a socket of its own (NERVE_TURN_SOCKET), which
	// serves its thread's messages when the snapshot is not to be read.
	Socket bool
}

// TurnFromEnv reads the turn's variables; outside a turn all are empty.
func TurnFromEnv(getenv func(string) string) Turn {
	return Turn{Thread: getenv("NERVE_THREAD"), Snapshot: getenv("NERVE_THREAD_SNAPSHOT"), Socket: getenv("NERVE_TURN_SOCKET") != ""}
}

// Own reports whether ref is the turn's own thread, to be read through
// the turn's socket (a remote turn's too: inside a sandbox it holds no
// token of the remote).
func (t Turn) Own(ref workflow.Ref) bool {
	return t.Socket && t.Thread != "" && ref.String() == t.Thread
}

// Fetch reads a thread's messages outside a turn: from the daemon or the
// thread's remote, whichever the caller reaches them through.
type Fetch func(ctx context.Context, ref workflow.Ref, f workflow.Filter) ([]workflow.Message, error)

// UsageError is a bad query (no thread, a bad filter, a thread that is
// not of the ref's workflow): exit 2 for the CLI, a tool error for MCP.
type UsageError struct{ Msg, hint string }

func (e *UsageError) Error() string { return e.Msg }
func (e *UsageError) ExitCode() int { return 2 }
func (e *UsageError) Hint() string  { return e.hint }

func usagef(hint, format string, a ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, a...), hint: hint}
}

// Resolve returns the ref q names (the turn's thread when it names none)
// and its filter, checked.
func (q Query) Resolve(turn Turn, now time.Time) (string, workflow.Filter, error) {
	ref := q.Ref
	if ref == "" {
		if turn.Thread == "" {
			return "", workflow.Filter{}, usagef("name one, e.g. code-review#thread-1, or ask inside a turn", "no thread given and NERVE_THREAD is not set")
		}
		ref = turn.Thread
	}
	if q.Last < 0 || q.Step < 0 {
		return "", workflow.Filter{}, usagef("", "%s and %s take positive numbers", q.name("last"), q.name("step"))
	}
	f := workflow.Filter{Role: q.Role, Last: q.Last, Step: q.Step}
	if q.Since != "" {
		since, err := parseSince(q.name("since"), q.Since, now)
		if err != nil {
			return "", f, err
		}
		f.Since = since
	}
	return ref, f, nil
}

// parseSince reads a duration ago (10m) or an RFC 3339 time; its errors
// call the filter by name.
func parseSince(name, s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			// A time in the future: nothing would ever match.
			return time.Time{}, usagef("e.g. "+name+" 10m for the last ten minutes", "%s %q: a duration ago cannot be negative", name, s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("e.g. "+name+" 10m or "+name+" 2026-11-23T10:00:00Z", "%s %q is neither a duration nor an RFC 3339 time", name, s)
}

// Messages answers q: from the turn's snapshot when q asks about the
// turn's own thread inside a turn, else through fetch. It returns the ref
// it answered for.
func Messages(ctx context.Context, q Query, turn Turn, fetch Fetch) (string, []workflow.Message, error) {
	refStr, f, err := q.Resolve(turn, time.Now())
	if err != nil {
		return "", nil, err
	}
	if refStr == turn.Thread && turn.Snapshot != "" {
		tail := 0 // all lines
		if f.Role == "" && f.Step == 0 && f.Since.IsZero() {
			tail = f.Last // `--last 3`, the usual question: decode only those
		}
		all, err := readSnapshot(turn.Snapshot, tail)
		switch {
		case err == nil:
			return refStr, f.Apply(all), nil
		case !errors.Is(err, fs.ErrNotExist) || !turn.Socket:
			return refStr, nil, err
		}
		// Not there (a sandbox without NERVE_HOME): the turn's socket
		// serves the same messages.
	}
	ref, err := ThreadRef(refStr)
	if err != nil {
		return refStr, nil, err
	}
	msgs, err := fetch(ctx, ref, f)
	return refStr, msgs, err
}

// ThreadRef parses a ref that must name a thread.
func ThreadRef(s string) (workflow.Ref, error) {
	ref, err := workflow.ParseRef(s)
	if err != nil {
		return ref, err
	}
	if ref.Thread == "" {
		return ref, usagef("e.g. "+s+"#thread-1; list threads with 'nerve workflow logs "+s+"'", "%s names no thread", s)
	}
	return ref, nil
}
