package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	// Maps the data segment in one call before the packages that write
	// to it initialise (a few milliseconds of page faults per command).
	_ "github.com/nerve-agents/nerve/internal/prefault"
)

func main() {
	stopProfile := profileCPU(os.Getenv("NERVE_CPUPROFILE"))
	code := Main(os.Args[1:], System())
	stopProfile()
	os.Exit(code)
}

// profileCPU writes a CPU profile of this process to path.PID when path
// is set, for whoever measures nerve (NERVE_CPUPROFILE=/tmp/cpu nerve
// khala serve): one file per process, as a bench starts several.
func profileCPU(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nerve: NERVE_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// Main runs nerve with args and returns the process exit code.
func Main(args []string, io *IOStreams) int {
	ctx := newSignalContext(context.Background())
	defer ctx.stop()

	f := newFactory(io)
	root := newCmdRoot(f)
	root.SetArgs(args)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	var se *silentError
	if errors.As(err, &se) {
		return se.code
	}
	if name, ok := cobraUnknownCommand(err); ok {
		// cobra's own error for a mistyped command, `unknown command "x"
		// for "nerve"` and its suggestions on lines of their own: ours.
		err = newUnknownCommand(root, name)
	}
	printError(io, err)
	return exitCodeOf(err)
}

// cobraUnknownCommand is the name cobra's "unknown command" error for the
// root names.
func cobraUnknownCommand(err error) (string, bool) {
	if uc := (*unknownCommandError)(nil); errors.As(err, &uc) {
		return "", false // ours already
	}
	rest, ok := strings.CutPrefix(err.Error(), "unknown command ")
	if !ok {
		return "", false
	}
	quoted, _, _ := strings.Cut(rest, " for ")
	name, err := strconv.Unquote(quoted)
	return name, err == nil
}

// printError writes one line saying what and why, then a hint line when
// there is one. Never a stack trace.
func printError(io *IOStreams, err error) {
	fmt.Fprintf(io.ErrOut, "nerve: %s\n", oneLine(err.Error()))
	if h := hintOf(err); h != "" {
		fmt.Fprintf(io.ErrOut, "hint: %s\n", h)
	}
}

// oneLine puts a message of several lines (a database driver's error
// lists each address it tried on a line of its own; a tool's output
// follows its error) on one: the why is often past the first line. A
// line said already (the driver's second attempt, without TLS) is not
// said again.
func oneLine(s string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || seen[line] {
			continue
		}
		seen[line] = true
		if b.Len() > 0 {
			if !strings.HasSuffix(b.String(), ":") {
				b.WriteByte(';')
			}
			b.WriteByte(' ')
		}
		b.WriteString(line)
	}
	return b.String()
}
