package main

import (
	"fmt"

	"github.com/nerve-agents/nerve/workflow"
	"github.com/spf13/cobra"
)

func newCmdWorkflowPush(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "push NAME|FILE.yaml REMOTE",
		Short: "Publish a local definition to a remote as a cloud workflow (moderator inlined)",
		Long: `Publish a local workflow to a Khala remote. The definition goes with its
moderator inlined, binding cloud, and without adapters: on a shared queue,
each machine's reflexes decide which CLI plays a role.`,
		Example: "  nerve workflow push code-review origin",
		Args:    exactArgs(2, "name the workflow and the remote"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var def *workflow.Definition
			var err error
			if workflow.IsFileRef(args[0]) {
				def, err = workflow.LoadFile(args[0])
			} else {
				var dirs []string
				if dirs, err = workflowDirs(f); err == nil {
					def, err = workflow.Find(dirs, args[0])
				}
			}
			if err != nil {
				return err
			}
			c, err := remoteClient(f, args[1])
			if err != nil {
				return err
			}
			src, err := def.CloudSource()
			if err != nil {
				return err
			}
			w, err := c.PutWorkflow(cmd.Context(), def.Name, src)
			if err != nil {
				return remoteUsage(err)
			}
			fmt.Fprintf(f.IO.Out, "published %s/%s (version %s)\n", args[1], def.Name, w.Version)
			return nil
		},
	}
}
