package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	nerve "github.com/nerve-agents/nerve"
	"github.com/nerve-agents/nerve/config"
)

type initOptions struct {
	Name        string
	NameGiven   bool   // --name was given, if empty: an error, not the host name
	Remote      string // NAME=URL
	EnrollToken string
	PersonToken string
	JSON        bool
	Example     bool
}

// check is one line of the availability checklist.
type check struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Hint   string `json:"hint"`
	// Needed checks decide the exit status; the rest are warnings.
	Needed bool `json:"needed"`
}

// MarshalJSON writes every key, a missing hint as null.
func (c check) MarshalJSON() ([]byte, error) {
	type plain check
	return json.Marshal(struct {
		plain
		Hint *string `json:"hint"`
	}{plain(c), nullable(c.Hint)})
}

type initReport struct {
	OK     bool    `json:"ok"`
	Checks []check `json:"checks"`
}

func newCmdInit(f *Factory, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Set up NERVE_HOME and check that this agent can do the work it is configured for",
		Long: `nerve init creates NERVE_HOME, a commented nerve.yaml and the workflows
directory when they are absent (it never overwrites a file), optionally adds
a remote and enrolls this agent with it, then checks availability: every
adapter a workflow or reflex names (binary, version, permissions), every
remote (reachable, token accepted), the extract endpoint. It exits 1 when
something a workflow or reflex needs is missing; other problems are warnings.`,
		Example: `  nerve init --name laptop-1
  nerve init --remote origin=http://khala.internal:7700 --enroll-token khala_enroll_...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.NameGiven = cmd.Flags().Changed("name")
			if runF != nil {
				return runF(opts)
			}
			return initRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "this agent's name in nerve.yaml (default: the host name)")
	cmd.Flags().StringVar(&opts.Remote, "remote", "", "add a remote as NAME=URL")
	cmd.Flags().StringVar(&opts.EnrollToken, "enroll-token", "", "enroll with the remote using this token (from 'nerve khala enroll-token')")
	cmd.Flags().StringVar(&opts.PersonToken, "person-token", "", "store a person's token for the remote (from 'nerve khala user add'), to answer human turns; agents that run as the same user can read it")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print {"ok", "checks": [...]}`)
	cmd.Flags().BoolVar(&opts.Example, "example", false, "print a nerve.yaml documenting every key, and do nothing else")
	return cmd
}

func initRun(ctx context.Context, f *Factory, opts *initOptions) error {
	if opts.Example {
		_, err := f.IO.Out.Write(nerve.ExampleConfig)
		return err
	}
	var remoteName, remoteURL string
	if opts.Remote != "" {
		var ok bool
		remoteName, remoteURL, ok = strings.Cut(opts.Remote, "=")
		if !ok || remoteName == "" || remoteURL == "" {
			return usageErrorf("write --remote NAME=URL, e.g. origin=http://127.0.0.1:7700", "bad --remote %q", opts.Remote)
		}
		if err := checkRemote("--remote", remoteName, remoteURL); err != nil {
			return err
		}
	}
	if opts.NameGiven {
		if err := config.CheckAgentName(opts.Name); err != nil {
			return usageErrorf("e.g. --name laptop-1", "--name %q: %v", opts.Name, err)
		}
	}
	if opts.EnrollToken != "" && remoteName == "" {
		return usageErrorf("add --remote NAME=URL", "--enroll-token needs --remote")
	}
	if opts.PersonToken != "" && remoteName == "" {
		return usageErrorf("add --remote NAME=URL", "--person-token needs --remote")
	}
	home := config.Home(f.Getenv)
	paths := config.Paths{Home: home}
	cfgPath := paths.Config()
	if f.configFile != "" {
		cfgPath = f.configFile
	}
	_, err := os.Stat(home)
	homeExisted := err == nil
	name, rename, unused, err := initName(f, opts, cfgPath, home)
	if err != nil {
		return err
	}
	// The remote is asked before anything is written: a refused enrollment
	// leaves no nerve.yaml naming an agent the remote did not take, so a
	// re-run with another --name is not a dead end.
	var remoteSteps []check
	if opts.EnrollToken != "" {
		detail, err := enroll(ctx, home, remoteName, remoteURL, opts.EnrollToken, name)
		if err != nil {
			return err
		}
		remoteSteps = append(remoteSteps, check{Name: "enrolled", Kind: "setup", OK: true, Detail: detail})
	}
	if opts.PersonToken != "" {
		detail, err := storePersonToken(ctx, home, remoteName, remoteURL, opts.PersonToken)
		if err != nil {
			return err
		}
		remoteSteps = append(remoteSteps, check{Name: "person token", Kind: "setup", OK: true, Detail: detail})
	}

	var steps []check
	step := func(name, detail string) {
		steps = append(steps, check{Name: name, Kind: "setup", OK: true, Detail: detail})
	}
	if _, err := ensureDir(home); err != nil {
		return fmt.Errorf("create NERVE_HOME: %w", err)
	}
	step("NERVE_HOME", existed(home, !homeExisted))
	fileName := opts.Name
	if fileName == "" {
		fileName = config.Defaults(home).Agent.Name
	}
	wrote, err := config.WriteInitial(cfgPath, fileName)
	if err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	if rename {
		if err := config.SetAgentName(cfgPath, name); err != nil {
			return err
		}
		step("nerve.yaml", "agent.name set to "+name+" in "+displayPath(cfgPath))
	} else {
		step("nerve.yaml", existed(cfgPath, wrote))
	}
	created, err := ensureDir(paths.Workflows())
	if err != nil {
		return err
	}
	step("workflows", existed(paths.Workflows(), created))
	steps = append(steps, remoteSteps...)

	cfg, err := config.Load(config.LoadOptions{File: f.configFile, Getenv: f.Getenv})
	if err != nil {
		return err
	}
	if unused != "" {
		fmt.Fprintln(f.IO.ErrOut, unused)
	}
	if r, ok := cfg.Remotes[remoteName]; ok && r.URL == remoteURL {
		step("remote "+remoteName, remoteURL+" in "+displayPath(cfgPath)+" (left as it is)")
	} else if remoteName != "" {
		if err := config.SetRemote(cfgPath, remoteName, remoteURL); err != nil {
			return err
		}
		step("remote "+remoteName, "set to "+remoteURL+" in "+displayPath(cfgPath))
		if cfg, err = config.Load(config.LoadOptions{File: f.configFile, Getenv: f.Getenv}); err != nil {
			return err
		}
	}
	rep := initReport{Checks: append(steps, availability(ctx, f, cfg)...)}
	rep.OK = true
	for _, c := range rep.Checks {
		if c.Needed && !c.OK {
			rep.OK = false
		}
	}
	if opts.JSON {
		if err := json.NewEncoder(f.IO.Out).Encode(rep); err != nil {
			return err
		}
	} else {
		printChecks(f.IO, rep)
	}
	if !rep.OK {
		return errSilentFail
	}
	return nil
}

func ensureDir(path string) (bool, error) {
	if fi, err := os.Stat(path); err == nil {
		if !fi.IsDir() {
			return false, fmt.Errorf("%s exists and is not a directory", path)
		}
		return false, nil
	}
	return true, os.MkdirAll(path, 0o700)
}

func existed(path string, created bool) string {
	if created {
		return "created " + displayPath(path)
	}
	return displayPath(path) + " exists (left as it is)"
}

func printChecks(io *IOStreams, rep initReport) {
	width := 22 // a long name (adapter reviewer-bot-2) widens the column for all
	for _, c := range rep.Checks {
		width = max(width, utf8.RuneCountInString(c.Name))
	}
	for _, c := range rep.Checks {
		mark := "✓"
		if !c.OK {
			mark = "✗"
			if !c.Needed {
				mark = "!"
			}
		}
		fmt.Fprintf(io.Out, "%s %-*s %s\n", mark, width, c.Name, c.Detail)
		if !c.OK && c.Hint != "" {
			fmt.Fprintf(io.Out, "  %-*s hint: %s\n", width, "", c.Hint)
		}
	}
	if rep.OK {
		fmt.Fprintln(io.Out, "ready")
	} else {
		fmt.Fprintln(io.Out, "not ready: fix the ✗ lines above")
	}
}
