package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "nerve",
		Short:         "Make AI coding agents work as a team",
		Long:          "nerve runs workflows of AI coding agents on this machine and serves shared turn queues (Khala).",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command's flags are parsed by now; this runs before any
		// command does anything.
		PersistentPreRunE: func(c *cobra.Command, args []string) error { return refuseNegativeDurations(c) },
	}
	root.PersistentFlags().StringVar(&f.configFile, "config", "", "nerve.yaml to use (default $NERVE_HOME/nerve.yaml)")
	root.SetFlagErrorFunc(flagError)
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
		newCmdSandboxExec(f, nil),
	)
	// cobra adds help and completion as it runs; added now, they get the
	// same checks as every other command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	rejectUnknownHelpTopics(root)
	rejectUnknownShells(root)
	rejectUnknownSubcommands(root)
	argsAreUsage(root)
	return root
}

// refuseNegativeDurations is the one check of every duration flag
// (--timeout, --grace, --ttl...): below zero means nothing to any of them,
// and would pass for "at once" or "from the future" in silence.
func refuseNegativeDurations(c *cobra.Command) error {
	var err error
	c.Flags().Visit(func(fl *pflag.Flag) {
		if err != nil || fl.Value.Type() != "duration" {
			return
		}
		if d, _ := time.ParseDuration(fl.Value.String()); d < 0 {
			err = usageErrorf(fmt.Sprintf("--%s: %s; the default is %s", fl.Name, fl.Usage, fl.DefValue),
				"--%s %s: a duration cannot be negative", fl.Name, fl.Value)
		}
	})
	return err
}

// argsAreUsage makes every command's refusal of its arguments a usage
// error (exit 2) that points to its help. cobra.NoArgs would tell a leaf
// command's argument "unknown command", as if a subcommand were mistyped.
func argsAreUsage(c *cobra.Command) {
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(c *cobra.Command, args []string) error {
		err := check(c, args)
		var ec exitCoder
		if err == nil || errors.As(err, &ec) {
			return err
		}
		hint := "see '" + c.CommandPath() + " --help'"
		if !c.HasSubCommands() && len(args) > 0 && check(c, nil) == nil && check(c, args[:1]) != nil {
			return usageErrorf(hint, "%s takes no arguments, got %q", c.CommandPath(), strings.Join(args, " "))
		}
		return usageErrorf(hint, "%s", err)
	}
}

// rejectUnknownHelpTopics makes `nerve help bogus` fail as `nerve bogus`
// does: cobra's help prints the usage and exits 0.
func rejectUnknownHelpTopics(root *cobra.Command) {
	help, _, err := root.Find([]string{"help"})
	if err != nil || help == root {
		return
	}
	help.Run = nil
	help.RunE = func(c *cobra.Command, args []string) error {
		cmd, rest, err := root.Find(args)
		if err != nil {
			return err
		}
		if len(rest) > 0 {
			return newUnknownCommand(cmd, rest[0])
		}
		cmd.InitDefaultHelpFlag() // so that its help lists -h, --help
		return cmd.Help()
	}
}

// rejectUnknownShells makes `nerve completion tcsh` say which shells there
// are: cobra's completion command prints its help and exits 0.
func rejectUnknownShells(root *cobra.Command) {
	comp, _, err := root.Find([]string{"completion"})
	if err != nil || comp == root {
		return
	}
	var shells []string
	for _, sh := range comp.Commands() {
		shells = append(shells, sh.Name())
	}
	comp.Args = cobra.ArbitraryArgs
	comp.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return usageErrorf("e.g. nerve completion bash; its --help says where the script goes",
			"unknown shell %q; want %s", args[0], strings.Join(shells, ", "))
	}
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
		return newUnknownCommand(c, args[0])
	}
}
