package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// remoteClient returns the client of a ref's remote. Inside a turn of a
// remote thread this is how `nerve thread messages` would reach it, so the
// daemon's token file is used.
func remoteClient(f *Factory, name string) (*remote.Client, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	return remote.ForConfig(cfg, name)
}

func remoteRun(ctx context.Context, f *Factory, ref workflow.Ref, opts *workflowRunOptions) error {
	c, err := remoteClient(f, ref.Remote)
	if err != nil {
		return err
	}
	in, err := parseInputs(opts.Inputs, opts.InputFile)
	if err != nil {
		return err
	}
	id, err := c.StartThread(ctx, ref.Workflow, in, "")
	if err != nil {
		return remoteUsage(err)
	}
	ref.Thread = id
	if opts.Detach {
		if opts.JSON {
			return json.NewEncoder(f.IO.Out).Encode(runResult{Thread: ref.String(), Status: workflow.StatusRunning})
		}
		fmt.Fprintln(f.IO.Out, ref.String())
		return nil
	}
	if !opts.JSON {
		fmt.Fprintf(f.IO.ErrOut, "%s started; follow it elsewhere with 'nerve workflow logs %s -f'\n", ref, ref)
	}
	p := newProgress(f.IO, ref.String())
	p.remote = ref.Remote
	err = c.Events(ctx, id, 0, func(e workflow.Event) error {
		if !opts.JSON {
			p.Event(e)
		}
		return nil
	})
	p.Close()
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(f.IO.ErrOut, "stopped following; %s goes on at %s\n", ref, ref.Remote)
		return err
	}
	if err != nil {
		return err
	}
	t, err := c.Thread(ctx, id)
	if err != nil {
		return err
	}
	return printOutcome(f, ref.String(), t, opts.JSON)
}

// remoteUsage makes the server's refusal of a request (unknown workflow,
// bad input) a usage error, as the same mistake is locally.
func remoteUsage(err error) error {
	var e *remote.Error
	if errors.As(err, &e) && (e.Status == 400 || e.Status == 404) {
		return &usageError{msg: e.Error()}
	}
	return err
}

func remoteLogs(ctx context.Context, f *Factory, ref workflow.Ref, opts *workflowLogsOptions) error {
	c, err := remoteClient(f, ref.Remote)
	if err != nil {
		return err
	}
	if ref.Thread == "" {
		ts, err := c.Threads(ctx, ref.Workflow, 0)
		if err != nil {
			return remoteUsage(err)
		}
		if opts.JSON {
			enc := json.NewEncoder(f.IO.Out)
			for _, t := range ts {
				if err := enc.Encode(t); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "THREAD\tSTATUS\tSTEPS\tSTARTED\tERROR")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s/%s#%s\t%s\t%d\t%s\t%s\n", ref.Remote, t.Workflow, t.ID, t.Status, t.Step, t.CreatedAt.Local().Format("2006-01-02 15:04:05"), firstLine(t.Error))
		}
		return tw.Flush()
	}
	t, err := c.Thread(ctx, ref.Thread)
	if err != nil {
		return remoteUsage(err)
	}
	if t.Workflow != ref.Workflow {
		return usageErrorf("", "%s is a thread of %s, not of %s", t.ID, t.Workflow, ref.Workflow)
	}
	if !opts.JSON {
		printWorkspace(f, t)
	}
	show := logPrinter(f, opts.JSON, func(step int) ([]workflow.Message, error) {
		return c.Messages(ctx, t.ID, workflow.Filter{Step: step})
	})
	if !opts.Follow {
		// What exists now, even while the thread runs on.
		return remoteTrace(ctx, c, t.ID, show)
	}
	if err := c.Events(ctx, t.ID, 0, show); err != nil {
		return err
	}
	if end, err := c.Thread(ctx, t.ID); err == nil && end.Status != workflow.StatusCompleted && !opts.JSON {
		return errSilentFail
	}
	return nil
}

// remoteTrace calls fn for each event of the thread's trace so far.
func remoteTrace(ctx context.Context, c *remote.Client, id string, fn func(workflow.Event) error) error {
	evs, err := c.Trace(ctx, id)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func remoteCancel(ctx context.Context, f *Factory, ref workflow.Ref, asJSON bool) error {
	c, err := remoteClient(f, ref.Remote)
	if err != nil {
		return err
	}
	if err := c.Cancel(ctx, ref.Thread); err != nil {
		return remoteUsage(err)
	}
	t, err := c.Thread(ctx, ref.Thread)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(f.IO.Out).Encode(runResult{Thread: ref.String(), Status: t.Status, Error: t.Error})
	}
	fmt.Fprintf(f.IO.Out, "%s %s\n", ref, t.Status)
	return nil
}

// remoteEntries lists each remote's workflows as REMOTE/NAME; a remote that
// cannot be read is one entry saying so, not an empty list.
func remoteEntries(ctx context.Context, f *Factory) []listEntry {
	cfg, err := f.Config()
	if err != nil {
		return nil
	}
	var out []listEntry
	for _, name := range sortedNames(cfg.Remotes) {
		c, err := remote.ForConfig(cfg, name)
		var wfs []remote.Workflow
		if err == nil {
			c.Retries = 0
			wfs, err = c.Workflows(ctx)
		}
		if err != nil {
			msg := err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "remote ") {
				msg = msg[i+2:]
			}
			out = append(out, listEntry{Ref: name + "/", Remote: name, Error: "unreachable: " + msg})
			continue
		}
		for _, w := range wfs {
			out = append(out, listEntry{Ref: name + "/" + w.Name, Name: w.Name, Remote: name, Binding: w.Binding, Description: w.Description})
		}
	}
	return out
}
