package workflow

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Ref names a workflow and optionally a thread, on this machine or on a
// remote: code-review, origin/code-review, origin/code-review#thread-12.
type Ref struct {
	Remote   string `json:"remote,omitempty"`
	Workflow string `json:"workflow"`
	Thread   string `json:"thread,omitempty"`
}

var (
	refNameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })
	threadIDRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^thread-[1-9][0-9]*$`) })
	errRefUsage = "a ref is [REMOTE/]WORKFLOW[#THREAD], e.g. code-review, origin/code-review#thread-12"
)

// RefError is a malformed ref: a usage error.
type RefError struct {
	Ref, Why string
}

func (e *RefError) Error() string { return fmt.Sprintf("bad ref %q: %s", e.Ref, e.Why) }
func (e *RefError) ExitCode() int { return 2 }
func (e *RefError) Hint() string  { return errRefUsage }

// ParseRef parses [REMOTE/]WORKFLOW[#THREAD].
func ParseRef(s string) (Ref, error) {
	var r Ref
	rest := s
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		r.Thread = rest[i+1:]
		rest = rest[:i]
		if !threadIDRE().MatchString(r.Thread) {
			return Ref{}, &RefError{s, fmt.Sprintf("thread %q is not of the form thread-N", r.Thread)}
		}
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		r.Remote = rest[:i]
		rest = rest[i+1:]
		if !refNameRE().MatchString(r.Remote) {
			return Ref{}, &RefError{s, fmt.Sprintf("remote %q is not a valid name", r.Remote)}
		}
	}
	r.Workflow = rest
	if r.Workflow == "" {
		return Ref{}, &RefError{s, "no workflow name"}
	}
	if !refNameRE().MatchString(r.Workflow) {
		return Ref{}, &RefError{s, fmt.Sprintf("workflow %q is not a valid name", r.Workflow)}
	}
	return r, nil
}

// IsThreadID reports whether s is a thread id of the form thread-N.
func IsThreadID(s string) bool { return threadIDRE().MatchString(s) }

// CompareThreadIDs orders thread ids by number: thread-2 before thread-10.
func CompareThreadIDs(a, b string) int {
	na, _ := strconv.Atoi(strings.TrimPrefix(a, "thread-"))
	nb, _ := strconv.Atoi(strings.TrimPrefix(b, "thread-"))
	return cmp.Compare(na, nb)
}

func (r Ref) String() string {
	s := r.Workflow
	if r.Remote != "" {
		s = r.Remote + "/" + s
	}
	if r.Thread != "" {
		s += "#" + r.Thread
	}
	return s
}
