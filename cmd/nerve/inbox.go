package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
time is shown as unreachable). Answer one with 'nerve thread answer'.`,
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
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print {"waiting": [...], "unreachable": [...]}`)
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 2*time.Second, "how long each remote may take to answer")
	return cmd
}

// inboxJSON is `nerve inbox --json`: what waits, and the remotes that
// could not be asked.
type inboxJSON struct {
	Waiting     []workflow.Waiting `json:"waiting"`
	Unreachable []unreachableJSON  `json:"unreachable"`
}

type unreachableJSON struct {
	Remote string `json:"remote"`
	Error  string `json:"error"`
}

// inboxSide is one side's answer: the local daemon's ("" remote) or a
// remote's.
type inboxSide struct {
	remote  string
	waiting []workflow.Waiting
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
	sides := make([]inboxSide, len(names)+1)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sides[i+1] = remoteInbox(ctx, f, name, opts.Timeout)
		}()
	}
	sides[0] = localInbox(ctx, f)
	wg.Wait()
	out := inboxJSON{Waiting: []workflow.Waiting{}, Unreachable: []unreachableJSON{}}
	for _, s := range sides {
		if s.err != nil {
			if s.remote == "" {
				return s.err
			}
			out.Unreachable = append(out.Unreachable, unreachableJSON{Remote: s.remote, Error: s.err.Error()})
			continue
		}
		out.Waiting = append(out.Waiting, s.waiting...)
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(out)
	}
	return printInbox(f, out)
}

func localInbox(ctx context.Context, f *Factory) inboxSide {
	c, err := f.daemonClient(ctx)
	if err != nil {
		return inboxSide{err: err}
	}
	ws, err := c.Inbox(ctx)
	return inboxSide{waiting: ws, err: err}
}

// remoteInbox asks one remote for what waits for this machine's person.
func remoteInbox(ctx context.Context, f *Factory, name string, timeout time.Duration) inboxSide {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := remoteClient(f, name)
	if err != nil {
		return inboxSide{remote: name, err: err}
	}
	c.Retries = 0           // an inbox answers now or says the remote is unreachable
	ws, err := c.Inbox(ctx) // with the person token stored for the remote
	if err != nil {
		return inboxSide{remote: name, err: err}
	}
	for i := range ws {
		ws[i].Ref = workflow.Ref{Remote: name, Workflow: ws[i].Workflow, Thread: ws[i].Thread}.String()
	}
	return inboxSide{remote: name, waiting: ws}
}

func printInbox(f *Factory, in inboxJSON) error {
	if len(in.Waiting) == 0 {
		fmt.Fprintln(f.IO.Out, "nothing waits for a person")
	} else {
		tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "THREAD\tSTEP\tROLE\tWAITS FOR\tSINCE\tINSTRUCTION")
		for _, w := range in.Waiting {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", w.Ref, w.Step, w.Role, workflow.WhoAnswers(w.AnsweredBy),
				fmtDuration(time.Since(w.Since).Truncate(time.Second))+" ago", firstLine(w.Instruction))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		w := in.Waiting[0]
		fmt.Fprintf(f.IO.Out, "answer with: %s\n", answerCommand(w.Ref, &w, false))
	}
	for _, u := range in.Unreachable {
		fmt.Fprintf(f.IO.Out, "%s: unreachable: %s\n", u.Remote, strings.TrimPrefix(u.Error, "remote "+u.Remote+": "))
	}
	return nil
}
