package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/workflow"
)

type workflowListOptions struct {
	JSON bool
}

// listEntry is the stable --json shape of `workflow list`: every key
// present, null when empty.
type listEntry struct {
	Ref         string  `json:"ref"`
	Name        *string `json:"name"`
	Remote      *string `json:"remote"`
	Binding     *string `json:"binding"`
	Description *string `json:"description"`
	// Error says why a remote's workflows could not be listed; hint, what
	// to do about it (shown under the list, not part of the JSON).
	Error *string `json:"error"`
	hint  string
}

// nullable is s, or null when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// str is what a nullable string holds ("" for null).
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func newCmdWorkflowList(f *Factory, runF func(*workflowListOptions) error) *cobra.Command {
	opts := &workflowListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List workflows: local ones by name, then each remote's as REMOTE/NAME",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return workflowListRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON array")
	return cmd
}

func workflowListRun(ctx context.Context, f *Factory, opts *workflowListOptions) error {
	dirs, err := workflowDirs(f)
	if err != nil {
		return err
	}
	entries := workflow.List(dirs)
	out := []listEntry{}
	for _, e := range entries {
		if e.Def == nil {
			fmt.Fprintf(f.IO.ErrOut, "warning: %s\n", firstLine(e.Err.Error()))
			continue
		}
		out = append(out, listEntry{Ref: e.Name, Name: nullable(e.Name), Binding: nullable(e.Def.Binding), Description: nullable(e.Def.Description)})
	}
	out = append(out, remoteEntries(ctx, f)...)
	if opts.JSON {
		return json.NewEncoder(f.IO.Out).Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "no workflows in %v\n", dirs)
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	for _, e := range out {
		if e.Error != nil {
			fmt.Fprintf(tw, "%s\t(%s)\t\n", e.Ref, *e.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Ref, str(e.Binding), str(e.Description))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range out {
		if e.hint != "" {
			fmt.Fprintf(f.IO.ErrOut, "hint: %s\n", e.hint)
		}
	}
	return nil
}
