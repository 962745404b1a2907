package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

type workflowCancelOptions struct {
	Ref  string
	JSON bool
}

func newCmdWorkflowCancel(f *Factory, runF func(*workflowCancelOptions) error) *cobra.Command {
	opts := &workflowCancelOptions{}
	cmd := &cobra.Command{
		Use:   "cancel REF#THREAD",
		Short: "Cancel a running thread; its running adapters are killed",
		Args:  exactArgs(1, "name the thread to cancel"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(opts)
			}
			return workflowCancelRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the outcome as JSON")
	return cmd
}

func workflowCancelRun(ctx context.Context, f *Factory, opts *workflowCancelOptions) error {
	ref, err := threadRef(opts.Ref)
	if err != nil {
		return err
	}
	src, err := f.threadSource(ctx, ref)
	if err != nil {
		return err
	}
	t, err := threadOf(ctx, src, ref)
	if err != nil {
		return err
	}
	// A thread that has ended is where cancel would take it: say so and
	// succeed, as `docker stop` of a stopped container does.
	already := t.Ended()
	if !already {
		cancelled, err := src.Cancel(ctx, ref.Thread)
		if err != nil {
			// It may have ended between the two requests.
			cur, terr := src.Thread(ctx, ref.Thread)
			if terr != nil || !cur.Ended() {
				return err
			}
			cancelled, already = cur, true
		}
		t = cancelled
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(newRunResult(ref, t))
	}
	if already {
		fmt.Fprintf(f.IO.Out, "%s already ended (%s)\n", ref, t.Status)
		return nil
	}
	fmt.Fprintf(f.IO.Out, "%s %s\n", ref, t.Status)
	return nil
}
