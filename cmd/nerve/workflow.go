package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/workflow"
)

func newCmdWorkflow(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "List, run, follow and cancel workflows",
	}
	cmd.AddCommand(newCmdWorkflowList(f, nil), newCmdWorkflowRun(f, nil), newCmdWorkflowLogs(f, nil), newCmdWorkflowCancel(f, nil), newCmdWorkflowPush(f, nil))
	return cmd
}

// threadRef parses a REF#THREAD argument that must name a thread.
func threadRef(arg string) (workflow.Ref, error) {
	ref, err := workflow.ParseRef(arg)
	if err != nil {
		return ref, err
	}
	if ref.Thread == "" {
		return ref, usageErrorf("e.g. "+arg+"#thread-1; list threads with 'nerve workflow logs "+arg+"'", "%s names no thread", arg)
	}
	return ref, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// workflowDirs returns the configured definition directories.
func workflowDirs(f *Factory) ([]string, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	return cfg.Workflows, nil
}

func displayPath(p string) string {
	if home, err := os.UserHomeDir(); err == nil && strings.HasPrefix(p, home+string(filepath.Separator)) {
		return "~" + strings.TrimPrefix(p, home)
	}
	return p
}

// completeWorkflows offers local workflow names to shell completion.
func completeWorkflows(f *Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		dirs, err := workflowDirs(f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, e := range workflow.List(dirs) {
			if e.Def != nil {
				names = append(names, e.Name)
			}
		}
		return names, cobra.ShellCompDirectiveDefault
	}
}
