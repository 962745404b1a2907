package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes, as DESIGN.md promises scripts.
const (
	exitOK     = 0
	exitFailed = 1 // the work failed: thread failed, check failed, remote refused
	exitUsage  = 2 // usage or configuration error
)

// usageError is a bad flag, argument or input: exit 2.
type usageError struct {
	msg  string
	hint string
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) ExitCode() int { return exitUsage }
func (e *usageError) Hint() string  { return e.hint }

func usageErrorf(hint, format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...), hint: hint}
}

// silentError has already been reported to the user; only its exit code
// matters (a failed thread, a failed check).
type silentError struct{ code int }

func (e *silentError) Error() string { return fmt.Sprintf("exit %d", e.code) }
func (e *silentError) ExitCode() int { return e.code }

// errSilentFail exits 1 without printing anything more.
var errSilentFail = &silentError{code: exitFailed}

// exitCoder is implemented by errors that know their exit code. Packages
// (config, workflow, daemon client) implement it so the mapping lives with
// the error, not in a table here.
type exitCoder interface{ ExitCode() int }

// hinter is implemented by errors that can say what to do next.
type hinter interface{ Hint() string }

func exitCodeOf(err error) int {
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitFailed
}

func hintOf(err error) string {
	var h hinter
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}

// failedError is work that failed for a reason worth a hint (a remote
// refused): exit 1.
type failedError struct {
	msg  string
	hint string
}

func (e *failedError) Error() string { return e.msg }
func (e *failedError) ExitCode() int { return exitFailed }
func (e *failedError) Hint() string  { return e.hint }

// flagError is a flag value the parser refused, as a usage error that says
// what the flag takes rather than the parser's internals (strconv.ParseInt:
// ...): `--last "x": want a whole number`.
func flagError(c *cobra.Command, err error) error {
	hint := "see '" + c.CommandPath() + " --help'"
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return usageErrorf(hint, "%s", err)
	}
	fl := bad.GetFlag()
	return usageErrorf(hint, "--%s %q: %s", fl.Name, bad.GetValue(), wantOf(fl.Value.Type(), errors.Unwrap(bad)))
}

// intBits is the size of each whole-number flag type pflag parses.
var intBits = map[string]int{"int": 64, "int64": 64, "int32": 32, "int16": 16, "int8": 8}

// wantOf says what a flag of type typ takes, given why a value was refused.
func wantOf(typ string, cause error) string {
	if bits, ok := intBits[typ]; ok {
		if errors.Is(cause, strconv.ErrRange) {
			return fmt.Sprintf("want a whole number from %d to %d", int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1))
		}
		return "want a whole number"
	}
	switch typ {
	case "duration":
		return "want a duration such as 90s, 5m or 1h30m"
	case "bool":
		return "want true or false"
	}
	return cause.Error()
}

// unknownCommandError is a mistyped command or subcommand: a usage error
// that names the commands it may have meant, as git does:
// `unknown command "workflwo"; did you mean "workflow"?`.
type unknownCommandError struct {
	name   string
	parent *cobra.Command
}

// newUnknownCommand is name mistyped as a subcommand of parent.
func newUnknownCommand(parent *cobra.Command, name string) error {
	if parent.SuggestionsMinimumDistance <= 0 {
		parent.SuggestionsMinimumDistance = 2 // cobra's default, which only its root's lookup sets
	}
	return &unknownCommandError{name: name, parent: parent}
}

func (e *unknownCommandError) Error() string {
	msg := fmt.Sprintf("unknown command %q", e.name)
	if e.parent.HasParent() {
		msg += fmt.Sprintf(" for %q", e.parent.CommandPath())
	}
	var quoted []string
	for _, s := range e.parent.SuggestionsFor(e.name) {
		quoted = append(quoted, strconv.Quote(s))
	}
	if len(quoted) > 0 {
		msg += "; did you mean " + strings.Join(quoted, " or ") + "?"
	}
	return msg
}

func (e *unknownCommandError) ExitCode() int { return exitUsage }
func (e *unknownCommandError) Hint() string  { return "see '" + e.parent.CommandPath() + " --help'" }
