package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

type workflowLogsOptions struct {
	Ref    string
	Follow bool
	JSON   bool
}

func newCmdWorkflowLogs(f *Factory, runF func(*workflowLogsOptions) error) *cobra.Command {
	opts := &workflowLogsOptions{}
	cmd := &cobra.Command{
		Use:   "logs REF[#THREAD]",
		Short: "Show a thread's messages and events; without #THREAD, list the workflow's threads",
		Long: `Show a thread's messages and events; -f follows it until it ends. Without
#THREAD, list the workflow's threads, newest first; with -f, follow the
newest of them.`,
		Example: `  nerve workflow logs code-review
  nerve workflow logs code-review#thread-3 -f
  nerve workflow logs code-review -f`,
		Args:              exactArgs(1, "name a workflow or a thread"),
		ValidArgsFunction: completeWorkflows(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(opts)
			}
			return workflowLogsRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep following until the thread ends")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one message object per line (threads: one thread per line)")
	return cmd
}

func workflowLogsRun(ctx context.Context, f *Factory, opts *workflowLogsOptions) error {
	ref, err := workflow.ParseRef(opts.Ref)
	if err != nil {
		return err
	}
	src, err := f.threadSource(ctx, ref)
	if err != nil {
		return err
	}
	if ref.Thread == "" && !opts.Follow {
		return listThreads(ctx, f, src, ref, opts.JSON)
	}
	if ref.Thread == "" {
		if ref, err = newestThread(ctx, f, src, ref); err != nil {
			return err
		}
	}
	t, err := threadOf(ctx, src, ref)
	if err != nil {
		return err
	}
	msgs, err := src.Messages(ctx, t.ID, workflow.Filter{})
	if err != nil {
		return err
	}
	if !opts.JSON {
		printWorkspace(f, t)
		printPeople(f, ref, t)
	}
	byStep := map[int]workflow.Message{}
	for _, m := range msgs {
		byStep[m.Step] = m
	}
	show := logPrinter(f, opts.JSON, func(step int) ([]workflow.Message, error) {
		if m, ok := byStep[step]; ok {
			return []workflow.Message{m}, nil
		}
		// answered after we read the messages
		return src.Messages(ctx, t.ID, workflow.Filter{Step: step})
	})
	if err := src.Events(ctx, t.ID, opts.Follow, show); err != nil {
		return err
	}
	if opts.JSON {
		return nil
	}
	if !opts.Follow {
		fmt.Fprintf(f.IO.Out, "usage: %s\n", t.Usage.Summary())
		return nil
	}
	end, err := src.Thread(ctx, t.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "usage: %s\n", end.Usage.Summary())
	if end.Status != workflow.StatusCompleted {
		return errSilentFail
	}
	return nil
}

// logPrinter prints a thread's log from its events, local or remote: each
// event as a line, and under each answered turn its message (fetched with
// message); with asJSON only the messages, one object per line.
func logPrinter(f *Factory, asJSON bool, message func(step int) ([]workflow.Message, error)) func(workflow.Event) error {
	printed := map[int]bool{}
	enc := json.NewEncoder(f.IO.Out)
	return func(e workflow.Event) error {
		if e.Type != workflow.EventTurnAnswered && e.Type != workflow.EventTurnFailed {
			if !asJSON {
				printEvent(f, e)
			}
			return nil
		}
		if printed[e.Step] {
			return nil
		}
		got, err := message(e.Step)
		if err != nil || len(got) == 0 {
			return err
		}
		printed[e.Step] = true
		if asJSON {
			return enc.Encode(newMessageJSON(got[0]))
		}
		printEvent(f, e)
		printMessage(f, got[0])
		return nil
	}
}

// threadOf fetches the thread a ref names, checking it is of that workflow.
func threadOf(ctx context.Context, src threadSource, ref workflow.Ref) (*workflow.Thread, error) {
	t, err := src.Thread(ctx, ref.Thread)
	if err != nil {
		return nil, err
	}
	if t.Workflow != ref.Workflow {
		return nil, usageErrorf("its ref is "+workflow.Ref{Remote: ref.Remote, Workflow: t.Workflow, Thread: t.ID}.String(), "%s is a thread of %s, not of %s", t.ID, t.Workflow, ref.Workflow)
	}
	return t, nil
}

func listThreads(ctx context.Context, f *Factory, src threadSource, ref workflow.Ref, asJSON bool) error {
	ts, err := threadsOf(ctx, f, src, ref)
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		if !asJSON {
			fmt.Fprintf(f.IO.ErrOut, "no threads of %s yet; start one with 'nerve workflow run %s'\n", ref, ref)
		}
		return nil
	}
	if asJSON {
		enc := json.NewEncoder(f.IO.Out)
		for _, t := range ts {
			if err := enc.Encode(newThreadJSON(ref.Remote, t)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSTATUS\tSTEPS\tSTARTED\tERROR")
	for _, t := range ts {
		tr := workflow.Ref{Remote: ref.Remote, Workflow: t.Workflow, Thread: t.ID}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", tr, t.Status, t.Step, t.CreatedAt.Local().Format("2006-01-02 15:04:05"), firstLine(t.Error))
	}
	return tw.Flush()
}

// newestThread is the ref of the newest thread of the workflow ref names,
// the one `logs -f` without #THREAD follows (as after 'workflow run -d').
func newestThread(ctx context.Context, f *Factory, src threadSource, ref workflow.Ref) (workflow.Ref, error) {
	ts, err := threadsOf(ctx, f, src, ref)
	if err != nil {
		return ref, err
	}
	if len(ts) == 0 {
		return ref, usageErrorf("start one with 'nerve workflow run "+ref.String()+"'", "%s has no threads to follow", ref)
	}
	ref.Thread = ts[0].ID
	fmt.Fprintf(f.IO.ErrOut, "following %s, the newest thread of %s\n", ref, ref.Workflow)
	return ref, nil
}

// threadsOf lists the threads of the workflow ref names, newest first. A
// name with no threads that is no workflow is a bad argument, as it is to
// 'workflow run', not a workflow yet to run.
func threadsOf(ctx context.Context, f *Factory, src threadSource, ref workflow.Ref) ([]*workflow.Thread, error) {
	ts, err := src.Threads(ctx, ref.Workflow)
	if err == nil && len(ts) == 0 {
		err = checkWorkflow(ctx, f, ref)
	}
	return ts, err
}

// checkWorkflow says whether the workflow ref names exists: locally a
// definition in the workflow directories (the threads of one run from a
// file are listed without asking), on a remote one it has published.
func checkWorkflow(ctx context.Context, f *Factory, ref workflow.Ref) error {
	if ref.Remote != "" {
		c, err := remoteClient(f, ref.Remote)
		if err != nil {
			return err
		}
		_, err = c.Workflow(ctx, ref.Workflow)
		return remoteUsage(err)
	}
	dirs, err := workflowDirs(f)
	if err != nil {
		return err
	}
	for _, e := range workflow.List(dirs) {
		if e.Name == ref.Workflow {
			return nil
		}
	}
	return usageErrorf("see the workflows with 'nerve workflow list'", "unknown workflow %q", ref.Workflow)
}

// shownEvent is e as the logs show it: a merge turn's as "step S  merge",
// S the last step of the parallel round it merges.
func shownEvent(e workflow.Event) workflow.Event {
	if e.Role == api.MergeRole && e.Step > api.MergeStepBase {
		e.Step, e.Role = e.Step-api.MergeStepBase, "merge"
	}
	return e
}

func printEvent(f *Factory, e workflow.Event) {
	e = shownEvent(e)
	at := e.At.Local().Format(time.TimeOnly)
	switch e.Type {
	case workflow.EventThreadStarted:
		fmt.Fprintf(f.IO.Out, "%s  %s started\n", at, e.Thread)
	case workflow.EventTurnStarted:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  started (%s)\n", at, e.Step, e.Role, doer(e))
	case workflow.EventTurnAnswered:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  answered by %s%s\n", at, e.Step, e.Role, e.Agent, parens(e.Adapter))
	case workflow.EventTurnFailed:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  failed: %s\n", at, e.Step, e.Role, e.Message)
	case workflow.EventThreadEnded:
		msg := ""
		if e.Message != "" {
			msg = ": " + e.Message
		}
		fmt.Fprintf(f.IO.Out, "%s  %s %s%s\n", at, e.Thread, e.Status, msg)
	case workflow.EventDetection:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  detection %s: %s\n", at, e.Step, e.Role, e.Status, e.Message)
	case workflow.EventTurnWaiting:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  %s\n", at, e.Step, e.Role, e.Message)
	case workflow.EventChildStarted:
		fmt.Fprintf(f.IO.Out, "%s  step %d  started child %s\n", at, e.Step, e.Message)
	case khalaTurnQueued:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  queued\n", at, e.Step, e.Role)
	case khalaTurnExpired, khalaTurnReleased:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  %s\n", at, e.Step, e.Role, requeued(e))
	case khalaTurnIdle:
		fmt.Fprintf(f.IO.Out, "%s  step %d  %s  idle: %s\n", at, e.Step, e.Role, e.Message)
	case api.EventNotify:
		fmt.Fprintf(f.IO.Out, "%s  %s\n", at, notifyLine(e))
	default:
		fmt.Fprintf(f.IO.Out, "%s  %s %s\n", at, e.Type, e.Message)
	}
}

// notifyLine shows an agent's notice: its turn, level and message.
func notifyLine(e workflow.Event) string {
	if e.Step == 0 {
		return fmt.Sprintf("notify %s: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("step %d  %s  notify %s: %s", e.Step, e.Role, e.Status, e.Message)
}

func printMessage(f *Factory, m workflow.Message) {
	content := strings.TrimRight(m.Content, "\n")
	if f.IO.IsTTY() && len(content) > 4000 {
		content = content[:4000] + "\n[... trimmed; --json shows all]"
	}
	for _, l := range strings.Split(content, "\n") {
		fmt.Fprintf(f.IO.Out, "    %s\n", l)
	}
	if m.Error != nil {
		fmt.Fprintf(f.IO.Out, "    error (%s): %s\n", m.Error.Kind, m.Error.Message)
	}
	if w := workSummary(m); w != "" {
		fmt.Fprintf(f.IO.Out, "    %s\n", w)
	}
}

// printWorkspace is the header of the log of a thread with a workspace:
// its branch and where it is.
func printWorkspace(f *Factory, t *workflow.Thread) {
	if ws := t.Workspace; ws != nil {
		fmt.Fprintf(f.IO.Out, "branch %s at %s (base %s, %s)\n", ws.Branch, shortCommit(ws.Head), shortCommit(ws.Base), ws.Repo)
	}
}

// workSummary is what a turn committed: "commit 1a2b3c4  +12 -3 in 2
// files", "no changes", or "" for a message without a workspace.
func workSummary(m workflow.Message) string {
	var parts []string
	if m.Commit != "" {
		parts = append(parts, "commit "+shortCommit(m.Commit))
	}
	if c := m.Changes; c != nil {
		if c.Files == 0 {
			parts = append(parts, "no changes")
		} else {
			files := "files"
			if c.Files == 1 {
				files = "file"
			}
			parts = append(parts, fmt.Sprintf("+%d -%d in %d %s", c.Insertions, c.Deletions, c.Files, files))
		}
	}
	return strings.Join(parts, "  ")
}

// shortCommit is a commit id as git log --oneline shows it.
func shortCommit(id string) string {
	if len(id) > 7 {
		return id[:7]
	}
	return id
}
