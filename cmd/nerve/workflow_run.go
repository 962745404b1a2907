package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/nerve-agents/nerve/internal/usage"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

type workflowRunOptions struct {
	Ref       string
	Inputs    []string
	InputFile string
	Detach    bool
	JSON      bool
	Workdir   string
	// Repo, Base and Branch override the definition's workspace for this
	// thread (workflow_run_workspace.go).
	Repo   string
	Base   string
	Branch string
	// Priority orders a cloud thread's turns in the queue; PrioritySet
	// says whether --priority was given.
	Priority    int
	PrioritySet bool
}

// runResult is the stable --json shape of `workflow run` and `workflow
// cancel`: every key present, null when empty.
type runResult struct {
	Thread string  `json:"thread"`
	Status string  `json:"status"`
	Result any     `json:"result"`
	Error  *string `json:"error"`
	// Usage is the thread's totals.
	Usage usage.Totals `json:"usage"`
	// Workspace is the thread's branch and head; null without one.
	Workspace *workflow.Workspace `json:"workspace"`
	// Priority is the thread's place in its Khala's queue (0 locally).
	Priority int `json:"priority"`
}

func newRunResult(ref workflow.Ref, t *workflow.Thread) runResult {
	r := runResult{Thread: ref.String(), Status: t.Status, Result: t.Result, Usage: t.Usage, Workspace: t.Workspace,
		Priority: t.Priority}
	if t.Error != "" {
		r.Error = &t.Error
	}
	return r
}

func newCmdWorkflowRun(f *Factory, runF func(*workflowRunOptions) error) *cobra.Command {
	opts := &workflowRunOptions{}
	cmd := &cobra.Command{
		Use:   "run REF | FILE.yaml",
		Short: "Start a thread of a workflow and follow it to its end",
		Long: `Start a thread of a workflow. REF is a workflow name found in the configured
workflow directories, or a definition file (ending in .yaml).

Attached (the default) it shows each turn live and exits 0 when the thread
completes, 1 when it fails or is cancelled. With --detach it prints the
thread's ref and returns; the daemon carries on.`,
		Example: `  nerve workflow run code-review --input change=@change.diff
  nerve workflow run ./examples/code-review.yaml --input change="Add retries" --detach
  nerve workflow run ./examples/code-change.yaml --repo . --base main --branch try/retries
  nerve workflow run origin/code-review --priority 10 --input change=@change.diff`,
		Args:              exactArgs(1, "name the workflow to run"),
		ValidArgsFunction: completeWorkflows(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			opts.PrioritySet = cmd.Flags().Changed("priority")
			if runF != nil {
				return runF(opts)
			}
			return workflowRunRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringArrayVarP(&opts.Inputs, "input", "i", nil, "an input as NAME=VALUE (VALUE @FILE reads a file; an array or object input is JSON); repeatable")
	cmd.Flags().StringVar(&opts.InputFile, "input-file", "", "inputs as one JSON or YAML object")
	cmd.Flags().BoolVarP(&opts.Detach, "detach", "d", false, "print the thread's ref and return")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the outcome as JSON")
	cmd.Flags().StringVar(&opts.Workdir, "workdir", "", "where the agents work (default: the current directory)")
	cmd.Flags().StringVar(&opts.Repo, "repo", "", "the thread's git repository: a path (local) or a git URL (cloud); needs a workflow that declares a workspace")
	cmd.Flags().StringVar(&opts.Base, "base", "", "the revision the thread's branch starts from (default: the definition's, else HEAD)")
	cmd.Flags().StringVar(&opts.Branch, "branch", "", "the thread's branch (default nerve/WORKFLOW/thread-N); must not exist")
	cmd.Flags().IntVar(&opts.Priority, "priority", 0, fmt.Sprintf("a cloud thread's priority, %d to %d: claims take higher first, then oldest", api.MinPriority, api.MaxPriority))
	return cmd
}

func workflowRunRun(ctx context.Context, f *Factory, opts *workflowRunOptions) error {
	req := daemon.StartRequest{Workdir: opts.Workdir}
	var ref workflow.Ref
	if workflow.IsFileRef(opts.Ref) {
		if _, err := os.Stat(opts.Ref); err != nil {
			hint := ""
			if errors.Is(err, fs.ErrNotExist) {
				hint = workflowFileHint(opts.Ref)
			}
			return usageErrorf(hint, "workflow file %s: %v", opts.Ref, errors.Unwrap(err))
		}
		req.File = opts.Ref
	} else {
		var err error
		if ref, err = workflow.ParseRef(opts.Ref); err != nil {
			return err
		}
		if ref.Thread != "" {
			return usageErrorf("to follow a thread use 'nerve workflow logs "+opts.Ref+" -f'", "%s names a thread; run takes a workflow", opts.Ref)
		}
		req.Workflow = ref.Workflow
	}
	if err := remoteTurnTarget(f, &ref, req.File); err != nil {
		return err
	}
	if req.Workdir == "" && ref.Remote == "" {
		req.Workdir, _ = os.Getwd()
	}
	in, err := parseInputs(opts.Inputs, opts.InputFile)
	if err != nil {
		return err
	}
	req.Input = in
	req.Parent = parentThread(f, ref)
	if req.Parent != "" {
		req.ParentTurn, _ = strconv.Atoi(f.Getenv("NERVE_STEP"))
	}
	if opts.PrioritySet {
		if ref.Remote == "" {
			return usageErrorf(remotePriorityHint(opts),
				"--priority orders a Khala's queue; a local thread runs in this daemon")
		}
		p := opts.Priority
		if err := api.CheckPriority(&p); err != nil {
			return usageErrorf("", "%v", err)
		}
		req.Priority = &p
	}
	if _, err := f.Config(); err != nil {
		return err
	}
	if ref.Remote == "" {
		if err := localWorkspace(ctx, f, opts, &req); err != nil {
			return err
		}
	}
	src, err := f.threadSource(ctx, ref)
	if err != nil {
		return err
	}
	if rs, ok := src.(remoteSource); ok {
		if req.Workspace, err = cloudWorkspace(ctx, f, rs.c, opts, ref.Workflow); err != nil {
			return err
		}
	}
	t, err := src.Start(ctx, req)
	if err != nil {
		return err
	}
	ref = workflow.Ref{Remote: ref.Remote, Workflow: t.Workflow, Thread: t.ID}
	noteTakenBranch(f, req.Workspace, ref)
	if opts.Detach {
		if opts.JSON {
			return json.NewEncoder(f.IO.Out).Encode(newRunResult(ref, t))
		}
		fmt.Fprintln(f.IO.Out, ref)
		return nil
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.ErrOut, "%s started; follow it elsewhere with 'nerve workflow logs %s -f'\n", ref, ref)
	}
	p := newProgress(f.IO, ref.String())
	p.remote = ref.Remote
	if h := f.Getenv(envUnclaimedHints); h != "" {
		p.hints = parseHints(h)
	}
	err = src.Events(ctx, t.ID, true, func(e workflow.Event) error {
		if !opts.JSON {
			p.Event(e)
		}
		return nil
	})
	p.Close()
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(f.IO.ErrOut, "stopped following; %s goes on %s ('nerve workflow cancel %s' stops it)\n", ref, src.Where(), ref)
		return err
	}
	if err != nil {
		return err
	}
	end, err := src.Thread(ctx, t.ID)
	if err != nil {
		return err
	}
	return printOutcome(f, ref, end, opts.JSON)
}

// printOutcome prints how a thread ended and returns the exit status.
func printOutcome(f *Factory, ref workflow.Ref, t *workflow.Thread, asJSON bool) error {
	if asJSON {
		if err := json.NewEncoder(f.IO.Out).Encode(newRunResult(ref, t)); err != nil {
			return err
		}
	} else {
		switch t.Status {
		case workflow.StatusCompleted:
			fmt.Fprintf(f.IO.ErrOut, "%s completed after %d steps (%s)\n", ref, t.Step, t.Usage.Summary())
			if l := workspaceLine(t.Workspace); l != "" {
				fmt.Fprintf(f.IO.ErrOut, "%s ('nerve thread diff %s' shows it)\n", l, ref)
			}
			fmt.Fprintln(f.IO.Out, renderResult(t.Result))
		case workflow.StatusRunning:
			fmt.Fprintf(f.IO.ErrOut, "%s is still running (the daemon stopped following it)\n", ref)
		default:
			if l := workspaceLine(t.Workspace); l != "" {
				fmt.Fprintln(f.IO.ErrOut, l)
			}
			fmt.Fprintf(f.IO.ErrOut, "%s %s: %s (%s)\n", ref, t.Status, t.Error, t.Usage.Summary())
		}
	}
	if t.Status != workflow.StatusCompleted {
		return errSilentFail
	}
	return nil
}

// remotePriorityHint says how to run opts' workflow on a remote, where
// --priority applies: a definition file is pushed first and run by name.
func remotePriorityHint(opts *workflowRunOptions) string {
	run := fmt.Sprintf("nerve workflow run REMOTE/%s --priority %d", opts.Ref, opts.Priority)
	if !workflow.IsFileRef(opts.Ref) {
		return "run it on a remote: " + run
	}
	name := "NAME"
	if def, err := workflow.LoadFile(opts.Ref); err == nil {
		name = def.Name
	}
	return fmt.Sprintf("push it to a remote and run it there by name: nerve workflow push %s REMOTE && nerve workflow run REMOTE/%s --priority %d",
		opts.Ref, name, opts.Priority)
}

func renderResult(v any) string {
	if s, ok := v.(string); ok {
		return strings.TrimRight(s, "\n")
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// exactArgs is cobra.ExactArgs with a usage error that says what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("see '"+cmd.CommandPath()+" --help'", "%s takes %d argument(s), got %d: %s", cmd.CommandPath(), n, len(args), what)
		}
		return nil
	}
}

// remoteTurnTarget keeps a remote turn's children on its remote (its
// thread creator is not this machine's owner, and a local workflow's
// adapter may run with full permissions): inside one ($NERVE_THREAD is
// REMOTE/...), a bare name is a workflow of that remote, and a file or
// another remote is refused. The daemon refuses a remote turn's local
// start too, whatever the environment says.
func remoteTurnTarget(f *Factory, ref *workflow.Ref, file string) error {
	turn, err := workflow.ParseRef(f.Getenv("NERVE_THREAD"))
	if err != nil || turn.Remote == "" || turn.Thread == "" {
		return nil
	}
	hint := fmt.Sprintf("run a workflow of that remote by name: nerve workflow run %s", turn.Remote+"/NAME")
	switch {
	case file != "":
		return usageErrorf(hint, "a remote turn (%s) may not run a local workflow file; its children run on its remote %s", turn, turn.Remote)
	case ref.Remote == "":
		ref.Remote = turn.Remote
	case ref.Remote != turn.Remote:
		return usageErrorf(hint, "a remote turn (%s) may not start a workflow on %s; its children run on its remote %s", turn, ref.Remote, turn.Remote)
	}
	return nil
}
