package adapter

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/nerve-agents/nerve/internal/usage"
)

// Sentinels that an *Error unwraps to, so callers can tell the kinds of
// failure apart with errors.Is. A cancelled turn unwraps to
// context.Canceled (or the parent context's error) instead.
var (
	// ErrNotFound: the adapter's binary is not on PATH (or not at the
	// configured path).
	ErrNotFound = errors.New("adapter binary not found")
	// ErrTimeout: the turn ran longer than the adapter's timeout.
	ErrTimeout = errors.New("adapter timed out")
	// ErrWorkdir: the request's workdir does not exist.
	ErrWorkdir = errors.New("adapter workdir missing")
)

// Error is why a turn failed. Its message names the adapter, the exit
// status and the last lines of stderr, on one line.
type Error struct {
	Adapter string
	// ExitStatus is the CLI's exit code, or -1 when it did not start or
	// was killed by a signal.
	ExitStatus int
	// Signal names the signal that ended the CLI, if one did.
	Signal string
	// Reason says what went wrong ("no result event; last output: …").
	Reason string
	// StderrTail holds the last lines of the CLI's stderr (bounded).
	StderrTail []string
	// Hint is a suggested fix to show the user, when there is one.
	Hint string
	// Usage is what the CLI reported before it failed, so tokens spent on
	// a failed turn are still counted; nil when nothing was reported.
	Usage *usage.Usage
	// Err is the underlying cause (ErrNotFound, ErrTimeout,
	// context.Canceled, an exec error), if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "adapter %s: %s", e.Adapter, e.Reason)
	switch {
	case e.Signal != "":
		fmt.Fprintf(&b, " (killed by %s)", e.Signal)
	case e.ExitStatus >= 0:
		fmt.Fprintf(&b, " (exit status %d)", e.ExitStatus)
	}
	if tail := lastLines(e.StderrTail, 3, 400); tail != "" {
		b.WriteString("; stderr: ")
		b.WriteString(tail)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// lastLines joins the last n telling lines with " | ", keeping at most max
// bytes from the end, so an error stays one readable line. Indented lines
// and lone brackets (stack traces, dumped objects) are passed over when
// there is anything else.
func lastLines(lines []string, n, max int) string {
	keep := pickLines(lines, n, true)
	if len(keep) == 0 {
		keep = pickLines(lines, n, false)
	}
	s := strings.Join(keep, " | ")
	if len(s) > max {
		s = "…" + validUTF8Suffix(s[len(s)-max:])
	}
	return s
}

func pickLines(lines []string, n int, telling bool) []string {
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		s := strings.TrimSpace(lines[i])
		if s == "" {
			continue
		}
		if telling && (lines[i][0] == ' ' || lines[i][0] == '\t' || strings.Trim(s, "{}[](),;") == "") {
			continue
		}
		keep = append(keep, s)
	}
	slices.Reverse(keep)
	return keep
}

// validUTF8Suffix drops a partial rune left at the start by byte slicing.
func validUTF8Suffix(s string) string {
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

// rateLimitRE matches what the CLIs say when the model's API refused for
// rate or quota: HTTP 429 (codex: "last status: 429 Too Many Requests";
// claude: "(api status 429)"; gemini: "code":429 and exit 173), the APIs'
// own words (rate_limit_error, RESOURCE_EXHAUSTED, "Quota exceeded") and
// the subscription CLIs' usage limits ("usage limit reached", "hit your
// usage limit").
var rateLimitRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b429\b|too many requests|rate[ _-]?limit|resource[ _]exhausted|quota (exceeded|exhausted)|exceeded (your |the )?(current )?quota|usage limit|insufficient_quota`)
})

// RateLimited reports whether err is a turn that failed because the
// CLI's API refused for rate or quota (HTTP 429 and the CLIs' own quota
// errors), read from its reason and the tail of its stderr. Such an
// adapter is worth pausing; other failures are not.
func RateLimited(err error) bool {
	var e *Error
	if !errors.As(err, &e) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotFound) {
		return false
	}
	if rateLimitRE().MatchString(e.Reason) {
		return true
	}
	for _, l := range e.StderrTail {
		if rateLimitRE().MatchString(l) && !strings.Contains(strings.ToLower(l), "disk quota") {
			return true
		}
	}
	return false
}
