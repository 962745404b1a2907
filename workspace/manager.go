package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/procgroup"
)

// Manager runs git for the workspaces of one NERVE_HOME. Its zero value
// is unusable: set Home. A Manager is safe for concurrent use and must not
// be copied after first use.
type Manager struct {
	Home string // NERVE_HOME: holds repos/ and worktrees/
	Git  string // the git binary; "" looks "git" up on PATH
	// Deadlines says how long each git command may run; nil (or a zero
	// field) is the default. It is read per command: a reloaded nerve.yaml
	// applies to the next one.
	Deadlines func() Deadlines

	once   sync.Once
	gitBin string
	gitErr error

	mu     sync.Mutex
	locks  map[string]*sync.Mutex
	silent map[string]time.Time // remotes that ran past their fetch deadline: when
}

// Workspace is what a thread records: Repo and Cloud as the workflow or
// the run gave them, Base and Head as commits, Branch the thread branch.
type Workspace struct {
	Repo   string `json:"repo"`   // local: a path in a git repository; cloud: a git URL (or a bare repo's path)
	Cloud  bool   `json:"-"`      // a cloud thread (the binding says so): Repo is the shared remote
	Base   string `json:"base"`   // the commit the thread started from
	Branch string `json:"branch"` // the thread branch
	Head   string `json:"head"`   // the branch's commit; "" before the branch exists
}

// BranchName is the default thread branch: nerve/WORKFLOW/thread-N.
func BranchName(workflow, thread string) string {
	return "nerve/" + workflow + "/" + thread
}

// git returns the git binary, or ErrNoGit.
func (m *Manager) git() (string, error) {
	m.once.Do(func() {
		name := m.Git
		if name == "" {
			name = "git"
		}
		m.gitBin, m.gitErr = exec.LookPath(name)
		if m.gitErr != nil {
			m.gitErr = wsErr(ErrNoGit, fmt.Sprintf("git is not installed (no %q on PATH); workspaces need it", name))
		}
	})
	return m.gitBin, m.gitErr
}

// CheckGit returns the installed git's version ("2.39.5"), or ErrNoGit;
// `nerve init` calls it when a workflow declares a workspace.
func (m *Manager) CheckGit(ctx context.Context) (string, error) {
	out, err := m.run(ctx, "", nil, "version")
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(strings.TrimSpace(out), "git version "), nil
}

// gitFlags keep the user's hooks, signing and fsmonitor out of every
// command nerve runs on an agent's behalf.
var gitFlags = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "core.fsmonitor=false",
	"-c", "advice.detachedHead=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "core.untrackedCache=true",
	"-c", "diff.renames=true",
}

// environ is the environment git runs in: the daemon's, without what would
// point git at another repository, with prompts off and no system config.
// ssh uses a connection master the user runs but starts none
// (ControlPersist): one detaches from git, and in the daemon, its
// subreaper, it would be taken for a turn's escapee and killed, its
// process title having overwritten the environment that names git.
func environ(extra []string) []string {
	var env []string
	sshSet := false
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
			"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
			"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_CEILING_DIRECTORIES":
			continue
		case "GIT_SSH_COMMAND", "GIT_SSH":
			sshSet = true
		case "GIT_ALLOW_PROTOCOL":
			kv = k + "=" + allowProtocol(strings.TrimPrefix(kv, k+"="))
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
	if !sshSet {
		env = append(env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ControlMaster=no")
	}
	return append(env, extra...)
}

// gitError is a failed git command: its arguments and stderr.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := reason(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return redact(fmt.Sprintf("git %s: %s", verb(e.args), msg))
}

// verb is the git subcommand among args, past any -c NAME=VALUE.
func verb(args []string) string {
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" || args[i] == "-C" {
			i++
			continue
		}
		return args[i]
	}
	return "git"
}

func (e *gitError) Unwrap() error { return e.err }

// run runs git in dir (or the current directory) and returns its stdout.
func (m *Manager) run(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	var out bytes.Buffer
	err := m.runTo(ctx, dir, env, &out, args...)
	return out.String(), err
}

// runTo runs git with its stdout to w.
func (m *Manager) runTo(ctx context.Context, dir string, env []string, w io.Writer, args ...string) error {
	bin, err := m.git()
	if err != nil {
		return err
	}
	// A process group of its own, registered while it runs: cancelling
	// kills what git started (git-remote-https, ssh, index-pack) with it,
	// and the daemon, their subreaper, reaps them afterwards.
	// The command's deadline kills the group just the same.
	gctx, cancel, expired := m.runCtx(ctx, args)
	defer cancel()
	flags := append(append([]string{}, gitFlags...), protocolFlags...)
	cmd := procgroup.Command(gctx, bin, append(flags, args...)...)
	cmd.Dir = dir
	cmd.Env = environ(env)
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := procgroup.Run(cmd); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if gctx.Err() != nil {
			return expired()
		}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return &gitError{args: args, stderr: stderr.String(), err: err}
		case errors.Is(err, exec.ErrWaitDelay):
			return wsErr(ErrGit, fmt.Sprintf("git %s exited, but a process it started kept its output open", verb(args)))
		}
		return wsErr(ErrGit, fmt.Sprintf("run git %s: %v", verb(args), err))
	}
	return nil
}

// fail turns a git error into a workspace error that says what failed.
func fail(what string, err error) error {
	var e *Error
	if errors.As(err, &e) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return wsErr(ErrGit, what+": "+err.Error())
}

// lock serialises work on one repository (a mirror or a user's repo):
// fetches, worktree adds and removals would race on git's lock files.
func (m *Manager) lock(key string) func() {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]*sync.Mutex{}
	}
	l := m.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[key] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// dirName is a readable, collision-free directory name for s.
func dirName(s string) string {
	sum := sha256.Sum256([]byte(s))
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.Trim(b.String(), "._")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return name + "-" + hex.EncodeToString(sum[:5])
}

func (m *Manager) reposDir() string     { return filepath.Join(m.Home, "repos") }
func (m *Manager) worktreesDir() string { return filepath.Join(m.Home, "worktrees") }
