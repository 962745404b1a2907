package workspace

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Deadlines bound every git command a Manager runs: one past its deadline
// is killed with its process group (git-remote-https, ssh, index-pack) and
// fails with ErrTimeout. A zero field is its default.
type Deadlines struct {
	Fetch time.Duration // clone and fetch: a remote's objects
	Push  time.Duration // push: the thread branch, a turn's ref
	Local time.Duration // everything else: worktrees, commits, merges, diffs
}

// The defaults: a clone of a large repository over a slow link fits in two
// minutes, a push of one turn's commits in one; local commands are slow
// only on huge trees.
const (
	DefaultFetchTimeout = 2 * time.Minute
	DefaultPushTimeout  = time.Minute
	DefaultLocalTimeout = 10 * time.Minute
)

// unansweredFor is how long a remote whose clone or fetch ran past its
// deadline is not tried again: the turns that name it meanwhile fail at
// once instead of each holding a slot for a whole deadline (a tarpit named
// by many threads frees the daemon after one deadline, not one per turn).
const unansweredFor = time.Minute

// deadline is how long a git command with subcommand verb may run, and the
// nerve.yaml key that says so.
func (m *Manager) deadline(verb string) (time.Duration, string) {
	var d Deadlines
	if m.Deadlines != nil {
		d = m.Deadlines()
	}
	switch verb {
	case "clone", "fetch", "ls-remote":
		return orDefault(d.Fetch, DefaultFetchTimeout), "workspace.fetch_timeout"
	case "push":
		return orDefault(d.Push, DefaultPushTimeout), "workspace.push_timeout"
	}
	return orDefault(d.Local, DefaultLocalTimeout), "workspace.local_timeout"
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// timeoutErr is a git command killed at its deadline.
func timeoutErr(verb string, limit time.Duration, key string) error {
	return wsErr(ErrTimeout, fmt.Sprintf("git %s did not finish within %s (%s) and was stopped", verb, limit, key))
}

// protocolFlags pin the transports nerve's git may use, over whatever the
// user's gitconfig says (command-line config wins over ~/.gitconfig, and a
// protocol.<name>.allow there over a protocol.allow): a repository URL
// comes from whoever started the thread, and ext:: runs any command, fd::
// talks to an inherited descriptor. file stays: local threads and shared
// disks use plain paths. Other helpers (name::url) run only if the user's
// own config allows them by name.
var protocolFlags = []string{
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=always",
	"-c", "protocol.git.allow=always",
	"-c", "protocol.http.allow=always",
	"-c", "protocol.https.allow=always",
	"-c", "protocol.ssh.allow=always",
	"-c", "protocol.ext.allow=never",
	"-c", "protocol.fd.allow=never",
}

// allowProtocol is GIT_ALLOW_PROTOCOL from the daemon's environment
// without ext and fd: git takes that variable over any config, so a list
// naming them would undo protocolFlags.
func allowProtocol(value string) string {
	var keep []string
	for _, p := range strings.Split(value, ":") {
		if p != "ext" && p != "fd" && p != "" {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return "file" // an empty list is git's "no restriction"
	}
	return strings.Join(keep, ":")
}

// unanswered returns an error when url ran past its fetch deadline less
// than unansweredFor ago.
func (m *Manager) unanswered(url string) error {
	m.mu.Lock()
	at, ok := m.silent[redact(url)]
	m.mu.Unlock()
	if !ok || time.Since(at) >= unansweredFor {
		return nil
	}
	limit, key := m.deadline("fetch")
	return wsErr(ErrTimeout, fmt.Sprintf("repo %s did not answer within %s (%s) at %s; not tried again before %s",
		url, limit, key, at.UTC().Format(time.TimeOnly), at.Add(unansweredFor).UTC().Format(time.TimeOnly)))
}

// noteUnanswered records that url ran past its fetch deadline when err
// says so; it returns err.
func (m *Manager) noteUnanswered(url string, err error) error {
	if !isTimeout(err) {
		return err
	}
	m.mu.Lock()
	if m.silent == nil {
		m.silent = map[string]time.Time{}
	}
	for u, at := range m.silent { // what is past its minute: the map stays small
		if time.Since(at) >= unansweredFor {
			delete(m.silent, u)
		}
	}
	m.silent[redact(url)] = time.Now()
	m.mu.Unlock()
	return err
}

func isTimeout(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Err == ErrTimeout
}

// runCtx is ctx bounded by the deadline of a git command with args.
func (m *Manager) runCtx(ctx context.Context, args []string) (context.Context, context.CancelFunc, func() error) {
	v := verb(args)
	limit, key := m.deadline(v)
	gctx, cancel := context.WithTimeout(ctx, limit)
	return gctx, cancel, func() error { return timeoutErr(v, limit, key) }
}
