package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

func newCmdWorkflowCancel(f *Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel REF#THREAD",
		Short: "Cancel a running thread; its running adapters are killed",
		Args:  exactArgs(1, "name the thread to cancel"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := threadRef(args[0])
			if err != nil {
				return err
			}
			if ref.Remote != "" {
				return remoteCancel(cmd.Context(), f, ref, asJSON)
			}
			c, err := f.daemonClient(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := threadOf(cmd.Context(), c, ref); err != nil {
				return err
			}
			t, err := c.Cancel(cmd.Context(), ref.Thread)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(f.IO.Out).Encode(runResult{Thread: ref.String(), Status: t.Status, Error: t.Error})
			}
			fmt.Fprintf(f.IO.Out, "%s %s\n", ref, t.Status)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return cmd
}
