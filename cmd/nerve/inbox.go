package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

type inboxOptions struct {
	JSON    bool
	Timeout time.Duration
}

func newCmdInbox(f *Factory, runF func(*inboxOptions) error) *cobra.Command {
	opts := &inboxOptions{}
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "List the turns waiting for a person, here and on every remote",
		Long: `List the human turns waiting for an answer: this machine's threads and
every configured remote's (asked in parallel; one that does not answer in
time is shown as unreachable). Answer one with 'nerve thread answer'.
An agent's blocking notice (MCP notify, level blocking) is listed too, as
a notice, until its thread's next turn starts.`,
		Example: `  nerve inbox
  nerve inbox --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return inboxRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print {"waiting": [...], "notices": [...], "unreachable": [...]}`)
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 2*time.Second, "how long each remote may take to answer")
	return cmd
}

// inboxJSON is `nerve inbox --json`: what waits, the blocking notices
// that stand, and the remotes that could not be asked.
type inboxJSON struct {
	Waiting     []waitingJSON     `json:"waiting"`
	Notices     []noticeJSON      `json:"notices"`
	Unreachable []unreachableJSON `json:"unreachable"`
}

// unreachableJSON is a remote whose inbox could not be read, and why.
type unreachableJSON struct {
	Remote string `json:"remote"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// The reasons of unreachableJSON: a script tells a remote it cannot reach
// from one that wants a person token.
const (
	reasonUnreachable        = "unreachable"          // not reached, or no inbox in its answer
	reasonNoPersonToken      = "no_person_token"      // none stored for it
	reasonPersonTokenRefused = "person_token_refused" // it refused the one stored
)

// personTokenError is a remote that takes no person token of this
// machine's (none stored, or refused): it is not unreachable, and storing
// a token fixes it.
type personTokenError struct{ msg, reason string }

func (e *personTokenError) Error() string { return e.msg }

// inboxSide is one side's answer: the local daemon's ("" remote) or a
// remote's.
type inboxSide struct {
	remote  string
	waiting []workflow.Waiting
	notices []api.Notice
	err     error
}

func inboxRun(ctx context.Context, f *Factory, opts *inboxOptions) error {
	if opts.Timeout <= 0 {
		return usageErrorf("", "--timeout must be positive")
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	names := sortedNames(cfg.Remotes)
	// Remotes answer as they can; what has come is shown at once, so one
	// slow or dead remote delays only its own line, by --timeout at most.
	answers := make(chan inboxSide, len(names))
	for _, name := range names {
		go func() { answers <- remoteInbox(ctx, f, name, opts.Timeout) }()
	}
	local := localInbox(ctx, f, len(names) > 0)
	if local.err != nil {
		return local.err
	}
	out := inboxJSON{Waiting: []waitingJSON{}, Notices: []noticeJSON{}, Unreachable: []unreachableJSON{}}
	p := &inboxPrinter{f: f, quiet: opts.JSON}
	add := func(s inboxSide) {
		if s.err != nil {
			u := unreachableJSON{Remote: s.remote, Error: s.err.Error(), Reason: reasonUnreachable}
			var pt *personTokenError
			if errors.As(s.err, &pt) {
				u.Reason = pt.reason
			}
			out.Unreachable = append(out.Unreachable, u)
			return
		}
		for _, w := range s.waiting {
			out.Waiting = append(out.Waiting, newWaitingJSON(w))
		}
		for _, n := range s.notices {
			out.Notices = append(out.Notices, newNoticeJSON(n))
		}
		p.rows(s.waiting, s.notices)
	}
	add(local)
	for range names {
		add(<-answers)
	}
	slices.SortFunc(out.Unreachable, func(a, b unreachableJSON) int { return strings.Compare(a.Remote, b.Remote) })
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(out)
	}
	p.end(out)
	return nil
}

// localInbox asks this machine's daemon what waits. With remotes to ask
// it starts none: a person who answers a Khala's turns needs no daemon
// here, and a stopped one's threads are listed once it runs again.
func localInbox(ctx context.Context, f *Factory, remotes bool) inboxSide {
	var c *daemon.Client
	var err error
	if remotes {
		c = controlClient(f.Getenv)
		if err = c.Ping(ctx); errors.As(err, new(*daemon.NotRunningError)) {
			return inboxSide{}
		}
	} else {
		c, err = f.daemonClient(ctx)
	}
	if err != nil {
		return inboxSide{err: err}
	}
	ws, err := c.Inbox(ctx)
	if err != nil {
		return inboxSide{err: err}
	}
	ns, err := c.Notices(ctx)
	return inboxSide{waiting: ws, notices: ns, err: err}
}

// remoteInbox asks one remote for what waits for this machine's person.
func remoteInbox(ctx context.Context, f *Factory, name string, timeout time.Duration) inboxSide {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := remoteClient(f, name)
	if err != nil {
		return inboxSide{remote: name, err: err}
	}
	if c.PersonToken == "" {
		return inboxSide{remote: name, err: &personTokenError{
			fmt.Sprintf("no person token for %s: store yours with '%s'", name, personTokenCommand(f, name)), reasonNoPersonToken}}
	}
	c.Retries = 0           // an inbox answers now or says the remote is unreachable
	ws, err := c.Inbox(ctx) // with the person token stored for the remote
	if remote.IsStatus(err, http.StatusUnauthorized) {
		err = &personTokenError{fmt.Sprintf("the person token was refused (unknown, or the person was removed): store a new one with '%s'",
			personTokenCommand(f, name)), reasonPersonTokenRefused}
	}
	if err != nil {
		return inboxSide{remote: name, err: err}
	}
	for i := range ws {
		ws[i].Ref = workflow.Ref{Remote: name, Workflow: ws[i].Workflow, Thread: ws[i].Thread}.String()
	}
	ns, err := c.Notices(ctx)
	if err != nil {
		return inboxSide{remote: name, err: err}
	}
	for i := range ns {
		ns[i].Ref = workflow.Ref{Remote: name, Workflow: ns[i].Workflow, Thread: ns[i].Thread}.String()
	}
	return inboxSide{remote: name, waiting: ws, notices: ns}
}

// personTokenCommand is the command that stores a person's token for
// remote name: init with the remote's URL as configured, so init leaves the
// remote as it is.
func personTokenCommand(f *Factory, name string) string {
	url := "URL"
	if cfg, err := f.Config(); err == nil {
		url, _ = cfg.RemoteURL(name)
	}
	return fmt.Sprintf("nerve init --remote %s=%s --person-token T", name, url)
}

// inboxPrinter prints the inbox's rows as each side answers, in columns
// wide enough for the usual refs.
type inboxPrinter struct {
	f      *Factory
	quiet  bool
	header bool
	first  *workflow.Waiting
	notice *api.Notice // the first notice listed
}

const inboxRow = "%-32s %4s  %-12s %-14s %-10s %s\n"

// rows prints a side's turns, then its notices: a notice's row says
// "notice" where a turn's names who answers, and its message where a
// turn's has the instruction.
func (p *inboxPrinter) rows(ws []workflow.Waiting, ns []api.Notice) {
	if p.quiet || len(ws)+len(ns) == 0 {
		return
	}
	if !p.header {
		fmt.Fprintf(p.f.IO.Out, inboxRow, "THREAD", "STEP", "ROLE", "WAITS FOR", "SINCE", "INSTRUCTION")
		p.header = true
	}
	for i := range ws {
		w := &ws[i]
		if p.first == nil {
			p.first = w
		}
		fmt.Fprintf(p.f.IO.Out, inboxRow, w.Ref, strconv.Itoa(w.Step), w.Role, workflow.WhoAnswers(w.AnsweredBy),
			fmtDuration(time.Since(w.Since).Truncate(time.Second))+" ago", firstLine(w.Instruction))
	}
	for i := range ns {
		n := &ns[i]
		if p.notice == nil {
			p.notice = n
		}
		fmt.Fprintf(p.f.IO.Out, inboxRow, n.Ref, strconv.Itoa(n.Step), n.Role, "notice",
			fmtDuration(time.Since(n.At).Truncate(time.Second))+" ago", firstLine(n.Message))
	}
}

func (p *inboxPrinter) end(in inboxJSON) {
	switch {
	case p.first != nil:
		fmt.Fprintf(p.f.IO.Out, "answer with: %s\n", answerCommand(p.first.Ref, p.first, false))
	case p.notice == nil:
		fmt.Fprintln(p.f.IO.Out, "nothing waits for a person")
	}
	if p.notice != nil {
		fmt.Fprintf(p.f.IO.Out, "read a notice's thread with: nerve workflow logs %s\n", p.notice.Ref)
	}
	for _, u := range in.Unreachable {
		msg := strings.TrimPrefix(u.Error, "remote "+u.Remote+": ")
		if u.Reason == reasonUnreachable {
			msg = "unreachable: " + msg
		}
		fmt.Fprintf(p.f.IO.Out, "%s: %s\n", u.Remote, msg)
	}
}
