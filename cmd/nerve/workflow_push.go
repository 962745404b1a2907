package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/workflow"
)

type workflowPushOptions struct {
	// Workflow is a local workflow's name or a definition file.
	Workflow string
	Remote   string
}

func newCmdWorkflowPush(f *Factory, runF func(*workflowPushOptions) error) *cobra.Command {
	opts := &workflowPushOptions{}
	return &cobra.Command{
		Use:   "push NAME|FILE.yaml REMOTE",
		Short: "Publish a local definition to a remote as a cloud workflow (moderator inlined)",
		Long: `Publish a local workflow to a Khala remote. The definition goes with its
moderator inlined, binding cloud, and without adapters: on a shared queue,
each machine's reflexes decide which CLI plays a role.`,
		Example: "  nerve workflow push code-review origin",
		Args:    exactArgs(2, "name the workflow and the remote"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Workflow, opts.Remote = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return workflowPushRun(cmd.Context(), f, opts)
		},
	}
}

func workflowPushRun(ctx context.Context, f *Factory, opts *workflowPushOptions) error {
	var def *workflow.Definition
	var err error
	if workflow.IsFileRef(opts.Workflow) {
		def, err = workflow.LoadFile(opts.Workflow)
	} else {
		var dirs []string
		if dirs, err = workflowDirs(f); err == nil {
			def, err = workflow.Find(dirs, opts.Workflow)
		}
	}
	if err != nil {
		return err
	}
	c, err := remoteClient(f, opts.Remote)
	if err != nil {
		return err
	}
	src, err := def.CloudSource()
	if err != nil {
		return err
	}
	w, err := c.PutWorkflow(ctx, def.Name, src)
	if err != nil {
		return remoteUsage(err)
	}
	fmt.Fprintf(f.IO.Out, "published %s/%s (version %s)\n", opts.Remote, def.Name, w.Version)
	return nil
}
