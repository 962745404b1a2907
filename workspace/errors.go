package workspace

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Kinds of Error, as a message's error.kind carries them.
const (
	KindWorkspace = "workspace"
	KindMerge     = "merge"
)

// Sentinels a caller can test with errors.Is; an *Error wraps one.
var (
	ErrNoGit        = errors.New("git is not available")
	ErrNotRepo      = errors.New("not a git repository")
	ErrBadBranch    = errors.New("bad branch name")
	ErrBranchExists = errors.New("branch exists")
	ErrUnknownRev   = errors.New("unknown revision")
	ErrPushRefused  = errors.New("push refused")
	ErrRemote       = errors.New("remote failed")
	ErrBranchMoved  = errors.New("branch moved")
	ErrWorktree     = errors.New("worktree damaged")
	ErrConflict     = errors.New("merge conflict")
	ErrGit          = errors.New("git failed")
	ErrTimeout      = errors.New("git ran past its deadline")
	ErrOtherRepo    = errors.New("not the thread's repository")
	ErrDirty        = errors.New("uncommitted changes")
)

// Error is a workspace failure as a turn reports it: Kind is KindMerge for
// a conflict (Files names the conflicting paths) and KindWorkspace for
// everything else; Error() is one sentence without credentials.
type Error struct {
	Kind  string
	Msg   string
	Step  int      // the parallel turn whose merge conflicted
	Files []string // conflicting files, for KindMerge
	Err   error    // a sentinel above
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the message error kind for err: "merge" for a conflict,
// "workspace" for any other error.
func KindOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind != "" {
		return e.Kind
	}
	return KindWorkspace
}

func wsErr(sentinel error, msg string) *Error {
	return &Error{Kind: KindWorkspace, Msg: redact(msg), Err: sentinel}
}

// userinfo matches the user info of a URL: scheme://user:secret@.
var userinfo = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`) })

// redact drops the user info (tokens, passwords) from every URL in s.
func redact(s string) string { return userinfo().ReplaceAllString(s, "$1") }

// reason is why git failed, from its stderr: the first "fatal:" or
// "error:" line, with the indented lines under it (the files a checkout
// would overwrite). git's last line may say nothing ("Aborting"); it is
// the reason only when no line says error.
func reason(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i, l := range lines {
		msg, ok := strings.CutPrefix(l, "fatal: ")
		if !ok {
			msg, ok = strings.CutPrefix(l, "error: ")
		}
		if !ok {
			continue
		}
		var items []string
		for _, next := range lines[i+1:] {
			if !strings.HasPrefix(next, "\t") && !strings.HasPrefix(next, " ") {
				break
			}
			if item := strings.TrimSpace(next); item != "" {
				items = append(items, item)
			}
		}
		if len(items) > maxItems {
			items = append(items[:maxItems], fmt.Sprintf("and %d more", len(items)-maxItems))
		}
		if len(items) > 0 {
			msg = strings.TrimSuffix(msg, ":") + ": " + strings.Join(items, ", ")
		}
		return strings.TrimSpace(msg)
	}
	return lastLine(stderr)
}

// maxItems is how many of the paths git lists under an error reason names.
const maxItems = 5

// lastLine is the last non-empty line of git's stderr, without the
// "fatal: " or "error: " git puts before it.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "hint:") {
			continue
		}
		for _, p := range []string{"fatal: ", "error: ", "remote: "} {
			l = strings.TrimPrefix(l, p)
		}
		return l
	}
	return ""
}
