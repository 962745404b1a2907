package main

import (
	"github.com/spf13/cobra"
)

func newCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "nerve",
		Short:         "Make AI coding agents work as a team",
		Long:          "nerve runs workflows of AI coding agents on this machine and serves shared turn queues (Khala).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&f.configFile, "config", "", "nerve.yaml to use (default $NERVE_HOME/nerve.yaml)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("see 'nerve "+c.Name()+" --help'", "%s", err.Error())
	})
	root.AddCommand(
		newCmdVersion(f, nil),
		newCmdValidate(f, nil),
		newCmdWorkflow(f),
		newCmdThread(f),
		newCmdInbox(f, nil),
		newCmdDaemon(f, nil),
		newCmdExampleAgent(f, nil),
		newCmdInit(f, nil),
		newCmdRemote(f),
		newCmdKhala(f),
		newCmdKnowledge(f),
		newCmdMCP(f, nil),
		newCmdConsole(f, nil),
		newCmdWorkspace(f),
		newCmdUsage(f, nil),
	)
	return root
}
