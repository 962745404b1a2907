package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

type usageOptions struct {
	Ref    string
	By     string
	Since  string
	Remote string
	JSON   bool
}

func newCmdUsage(f *Factory, runF func(*usageOptions) error) *cobra.Command {
	opts := &usageOptions{}
	cmd := &cobra.Command{
		Use:   "usage [REF]",
		Short: "Total tokens and cost by workflow, role, agent, adapter, model or day",
		Long: `Total what agents spent: local threads through the daemon, or a remote's
(a REMOTE/... ref, or --remote R) from its Khala. REF narrows to a workflow
or one thread. A cost is the CLI's own or computed from pricing: in
nerve.yaml; an unknown cost is shown as such, never guessed.`,
		Example: `  nerve usage --by model
  nerve usage code-review --by role --since 2026-11-01
  nerve usage origin/code-review#thread-7 --by agent --json
  nerve usage --remote origin --by day`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("see 'nerve usage --help'", "nerve usage takes at most one ref, got %d: %s", len(args), strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Ref = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return usageRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.By, "by", "workflow", "group by "+strings.Join(usage.Dimensions, "|"))
	cmd.Flags().StringVar(&opts.Since, "since", "", "from this UTC day on (YYYY-MM-DD)")
	cmd.Flags().StringVar(&opts.Remote, "remote", "", "a remote's usage, from its Khala")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	return cmd
}

func usageRun(ctx context.Context, f *Factory, opts *usageOptions) error {
	q := usage.Query{By: opts.By, Since: opts.Since}
	if err := usage.CheckDimension(q.By); err != nil {
		return usageErrorf("", "--by: %s", err)
	}
	if _, err := usage.ParseSince(q.Since); err != nil {
		return usageErrorf("", "%s", err)
	}
	var ref workflow.Ref
	if opts.Ref != "" {
		var err error
		if ref, err = workflow.ParseRef(opts.Ref); err != nil {
			return err
		}
		// A thread's usage includes its children's, of their own
		// workflows: the ref's workflow filters only a workflow's usage.
		if q.Thread = ref.Thread; q.Thread == "" {
			q.Workflow = ref.Workflow
		}
	}
	switch {
	case opts.Remote != "" && ref.Remote != "" && ref.Remote != opts.Remote:
		return usageErrorf("", "%s is on remote %s, not %s", opts.Ref, ref.Remote, opts.Remote)
	case opts.Remote != "":
		ref.Remote = opts.Remote
	}
	src, err := f.threadSource(ctx, ref)
	if err != nil {
		return err
	}
	if ref.Thread != "" {
		// The thread must be of the workflow its ref names.
		if _, err := threadOf(ctx, src, ref); err != nil {
			return err
		}
	}
	r, err := src.Usage(ctx, q)
	if err != nil {
		return err
	}
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(r)
	}
	return printUsage(f, r)
}

// printUsage prints a report as a table, its total last.
func printUsage(f *Factory, r *usage.Report) error {
	if len(r.Groups) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no usage recorded yet")
		return nil
	}
	// Figures align right; the first column's names are padded to one
	// width, so they read left-aligned.
	width := len(r.By)
	for _, g := range r.Groups {
		width = max(width, len(g.Key), len("(unknown)"))
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tMESSAGES\tINPUT\tOUTPUT\tCACHE READ\tCOST\t\n", width, strings.ToUpper(r.By))
	row := func(key string, t usage.Totals) {
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t%s\t%s\t\n", width, key, usage.Count(t.Messages), usage.Count(t.InputTokens),
			usage.Count(t.OutputTokens), usage.Count(t.CacheReadTokens), costCell(t))
	}
	for _, g := range r.Groups {
		key := g.Key
		if key == "" {
			key = "(unknown)"
		}
		row(key, g.Totals)
	}
	row("TOTAL", r.Total)
	return tw.Flush()
}

// costCell is a cost as a table shows it: "-" when unknown, "≥ $x" when
// some of its messages had none.
func costCell(t usage.Totals) string {
	switch {
	case t.CostUSD == nil:
		return "-"
	case t.Unpriced > 0:
		return "≥ " + usage.Dollars(*t.CostUSD)
	}
	return usage.Dollars(*t.CostUSD)
}
