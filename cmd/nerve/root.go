package main

import (
	"fmt"

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
		return usageErrorf("see '"+c.CommandPath()+" --help'", "%s", err.Error())
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
	rejectUnknownSubcommands(root)
	return root
}

// rejectUnknownSubcommands makes each command group (workflow, khala,
// remote...) refuse a subcommand it does not have, as the root does:
// cobra would print the group's help and exit 0, so a typo in a script
// would pass for success. The group alone still prints its help.
func rejectUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		rejectUnknownSubcommands(sub)
	}
	if c == c.Root() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 || args[0] == "help" {
			return c.Help()
		}
		// cobra's own wording: Main makes it a usage error with its hint
		return fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	}
}
