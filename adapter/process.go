package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nerve-agents/nerve/internal/envlist"
	"github.com/nerve-agents/nerve/internal/procgroup"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/internal/usage"
)

// Process timing. Variables, not constants, so tests of this package can
// shorten them; nothing else changes them.
var (
	// killGrace is how long a process group has between SIGTERM and
	// SIGKILL: the CLIs exit at once on SIGTERM, so a short grace is enough.
	killGrace = 3 * time.Second
	// pipeDrain is how long stdout and stderr may stay open after the group
	// was killed (only a process that left the group can hold them).
	pipeDrain = 2 * time.Second
)

// maxArgBytes is the longest single argument execve accepts on Linux
// (MAX_ARG_STRLEN, 32 pages, less the terminating NUL). Adapters that can
// read the prompt from stdin do so when it is longer.
const maxArgBytes = 128<<10 - 1

// invocation is one turn's command line, as an adapter type builds it.
type invocation struct {
	args  []string // after the binary
	env   []string // the adapter's own variables (quiet, posture)
	stdin *string  // nil: /dev/null
	// binds are paths of the turn's own (a temp dir) a sandbox must
	// show the CLI read-write.
	binds   []sandbox.Bind
	parser  parser
	cleanup func() // removes temp files; may be nil
}

// parser turns a CLI's stdout into a Result. It sees every line (from one
// goroutine) and then decides, from the CLI's own final event, whether the
// turn succeeded.
type parser interface {
	line(line []byte, cut bool)
	// finish returns the content, or a non-empty failure reason.
	finish(o outcome) (content string, truncated bool, reason string)
	usage() usage.Usage
}

// outcome is what the runner knows when the CLI has exited.
type outcome struct {
	exit     int      // exit code, -1 when killed by a signal
	lastOut  []string // the last few stdout lines, bounded
	lastErrs []string // the stderr tail
}

// cliAdapter is every built-in type: they differ only in how they build
// the invocation and parse the output.
type cliAdapter struct {
	info  Info
	cfg   Spec
	build func(a *cliAdapter, req Request) (*invocation, error)
}

func (a *cliAdapter) Name() string { return a.info.Name }
func (a *cliAdapter) Type() string { return a.info.Type }

func (a *cliAdapter) fail(reason string, err error) *Error {
	return &Error{Adapter: a.info.Name, ExitStatus: -1, Reason: reason, Err: err}
}

// Run runs one turn; see Adapter.Run.
func (a *cliAdapter) Run(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	if req.Workdir != "" {
		st, err := os.Stat(req.Workdir)
		if err != nil {
			return nil, a.fail(fmt.Sprintf("workdir %s does not exist", req.Workdir), ErrWorkdir)
		}
		if !st.IsDir() {
			return nil, a.fail(fmt.Sprintf("workdir %s is not a directory", req.Workdir), ErrWorkdir)
		}
	}
	inv, err := a.build(a, req)
	if err != nil {
		return nil, a.fail(err.Error(), err)
	}
	if inv.cleanup != nil {
		defer inv.cleanup()
	}
	for _, arg := range inv.args {
		if len(arg) > maxArgBytes {
			return nil, a.fail(fmt.Sprintf("an argument of %d bytes (the prompt?) is longer than Linux allows on a command line (128 KiB)", len(arg)), nil)
		}
	}
	env := mergeEnv(baseEnv(req), inv.env, sortedEnv(a.cfg.Env), req.Env)
	path, err := lookPath(a.info.Binary, envValue(env, "PATH"), req.Workdir)
	if err != nil {
		e := a.fail(err.Error(), ErrNotFound)
		e.Hint = fmt.Sprintf("install %s, or set adapters.%s.binary in nerve.yaml", a.info.Binary, a.info.Name)
		return nil, e
	}
	return a.execute(ctx, req, inv, path, env, start)
}

// execute runs the built command line to its end and judges the outcome.
func (a *cliAdapter) execute(ctx context.Context, req Request, inv *invocation, path string, env []string, start time.Time) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, a.fail("cancelled", context.Cause(ctx))
	}
	p, err := newPipes(inv.stdin != nil)
	if err != nil {
		return nil, a.fail("create pipes: "+err.Error(), err)
	}
	defer p.close()
	cmd := a.command(req, inv, path, env)
	cmd.Dir = req.Workdir
	cmd.Stdout, cmd.Stderr = p.childOut, p.childErr
	if p.child != nil {
		cmd.Stdin = p.child
	}
	pidfd := -1
	// Its own session, not only its own group: nothing it starts can join
	// a group of the daemon's session (setpgid stays within a session),
	// the daemon's own or a helper's, which the daemon's sweep spares.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, PidFD: &pidfd}
	if err := procgroup.Start(cmd, req.OnStart); err != nil {
		return nil, a.fail("start "+a.info.Binary+": "+err.Error(), err)
	}
	if pidfd >= 0 {
		defer syscall.Close(pidfd)
	}
	p.closeChildEnds()

	lastOut := newTail(lastOutputLines, lastOutputBytes)
	errTail := newTail(stderrTailLines, stderrLineBytes)
	w := &watch{pid: cmd.Process.Pid, pidfd: pidfd, pipes: p,
		out: newLineSplitter(maxLineBytes, func(line []byte, cut bool) {
			lastOut.add(line)
			if req.OnOutput != nil {
				req.OnOutput(line)
			}
			inv.parser.line(line, cut)
		}),
		errs: newLineSplitter(maxLineBytes, func(line []byte, _ bool) { errTail.add(line) }),
	}
	if inv.stdin != nil {
		w.input = []byte(*inv.stdin)
	}
	if a.info.Timeout > 0 {
		w.deadline = start.Add(a.info.Timeout)
	}
	watchErr := w.run(ctx)
	if watchErr != nil {
		// Without a watch the group cannot be bounded: end it.
		_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	}
	waitErr := cmd.Wait()

	o := outcome{exit: -1, lastOut: lastOut.get(), lastErrs: errTail.get()}
	e := &Error{Adapter: a.info.Name, ExitStatus: -1, StderrTail: o.lastErrs}
	if ps := cmd.ProcessState; ps != nil {
		o.exit = ps.ExitCode()
		e.ExitStatus = o.exit
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = "signal " + ws.Signal().String()
		}
	} else if waitErr != nil {
		e.Reason, e.Err = "wait: "+waitErr.Error(), waitErr
		return nil, e
	}
	if watchErr != nil {
		e.Reason, e.Err = "watch the process: "+watchErr.Error(), watchErr
		return nil, e
	}
	u := inv.parser.usage()
	u.DurationMS = time.Since(start).Milliseconds()
	if u.Model == "" {
		u.Model = a.cfg.Model
	}
	if w.killed {
		e.Usage = &u
		if errors.Is(w.cause, ErrTimeout) {
			e.Reason, e.Err = fmt.Sprintf("timed out after %s", a.info.Timeout), ErrTimeout
		} else {
			e.Reason, e.Err = "cancelled", w.cause
		}
		return nil, e
	}
	content, truncated, reason := inv.parser.finish(o)
	if reason != "" {
		e.Reason, e.Usage = reason, &u
		return nil, e
	}
	return &Result{Content: content, Usage: u, Truncated: truncated}, nil
}

// mergeEnv concatenates environment lists, later lists overriding earlier
// ones (envlist.Merge, which the sandbox uses too).
var mergeEnv = envlist.Merge

// signalGroup signals the process group led by pid. ESRCH (the group is
// already empty) is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func sortedEnv(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds name the way the child's own shell would: on the child's
// PATH (which Request.Env may have changed), or relative to its workdir
// when name contains a slash.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%q not found: %v", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found on PATH", name)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("is a directory")
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("not executable")
	}
	return nil
}
