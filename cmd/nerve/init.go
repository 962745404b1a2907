package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	nerve "github.com/nerve-agents/nerve"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/remote"
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
	var steps []check
	step := func(name, detail string) {
		steps = append(steps, check{Name: name, Kind: "setup", OK: true, Detail: detail})
	}

	created, err := ensureDir(home)
	if err != nil {
		return fmt.Errorf("create NERVE_HOME: %w", err)
	}
	step("NERVE_HOME", existed(home, created))
	cfgPath := paths.Config()
	if f.configFile != "" {
		cfgPath = f.configFile
	}
	name := opts.Name
	if name == "" {
		name = config.Defaults(home).Agent.Name
	}
	wrote, err := config.WriteInitial(cfgPath, name)
	if err != nil {
		return fmt.Errorf("write %s: %w", cfgPath, err)
	}
	step("nerve.yaml", existed(cfgPath, wrote))
	created, err = ensureDir(paths.Workflows())
	if err != nil {
		return err
	}
	step("workflows", existed(paths.Workflows(), created))

	cfg, err := config.Load(config.LoadOptions{File: f.configFile, Getenv: f.Getenv})
	if err != nil {
		return err
	}
	if !wrote && opts.Name != "" && opts.Name != cfg.Agent.Name {
		// init never overwrites nerve.yaml (DESIGN.md), so say why --name did nothing.
		fmt.Fprintf(f.IO.ErrOut, "--name %s not used: %s names this agent %s and was left as it is; edit agent.name there to rename it\n",
			opts.Name, displayPath(cfgPath), cfg.Agent.Name)
	}
	if opts.EnrollToken != "" {
		// Enroll first: a refused token leaves nerve.yaml as it was.
		detail, err := enroll(ctx, home, remoteName, remoteURL, opts.EnrollToken, cfg.Agent.Name)
		if err != nil {
			return err
		}
		step("enrolled", detail)
	}
	if opts.PersonToken != "" {
		detail, err := storePersonToken(ctx, home, remoteName, remoteURL, opts.PersonToken)
		if err != nil {
			return err
		}
		step("person token", detail)
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

// enroll enrolls this agent as name with the remote at url, unless the
// token it already holds for that remote is accepted there: running init
// again must not spend another enrollment token. It says what it did.
func enroll(ctx context.Context, home, remoteName, url, enrollToken, name string) (string, error) {
	if tok, _ := remote.LoadToken(home, remoteName); tok != "" {
		c := remote.New(remoteName, url, tok)
		c.Retries = 0
		if agent, err := c.Me(ctx); err == nil {
			return fmt.Sprintf("already enrolled as %s with %s; the enrollment token was not used", agent, remoteName), nil
		}
	}
	tok, err := remote.New(remoteName, url, "").Enroll(ctx, enrollToken, name)
	if err != nil {
		return "", enrollError(err, remoteName, name)
	}
	if err := remote.SaveToken(home, remoteName, tok); err != nil {
		return "", fmt.Errorf("store the agent token: %w", err)
	}
	return fmt.Sprintf("as %s with %s; token in %s (0600)", name, remoteName, displayPath(filepath.Join(home, "tokens", remoteName))), nil
}

// enrollError says why a remote refused to enroll this agent: the work
// failed (exit 1), though what to do about it is the user's.
func enrollError(err error, remoteName, agent string) error {
	switch {
	case remote.IsStatus(err, 401):
		return &failedError{msg: fmt.Sprintf("remote %s refused the enrollment token (used up, expired or wrong)", remoteName),
			hint: "ask the server's operator for a new one: nerve khala enroll-token"}
	case remote.IsStatus(err, 409):
		return &failedError{msg: fmt.Sprintf("remote %s already has an agent called %s", remoteName, agent),
			hint: "pick another name with --name"}
	}
	return err
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
	for _, c := range rep.Checks {
		mark := "✓"
		if !c.OK {
			mark = "✗"
			if !c.Needed {
				mark = "!"
			}
		}
		fmt.Fprintf(io.Out, "%s %-22s %s\n", mark, c.Name, c.Detail)
		if !c.OK && c.Hint != "" {
			fmt.Fprintf(io.Out, "  %-22s hint: %s\n", "", c.Hint)
		}
	}
	if rep.OK {
		fmt.Fprintln(io.Out, "ready")
	} else {
		fmt.Fprintln(io.Out, "not ready: fix the ✗ lines above")
	}
}

// storePersonToken checks a person's token with the remote (its inbox
// answers only a person) and stores it, 0600, apart from the agent token.
func storePersonToken(ctx context.Context, home, remoteName, url, tok string) (string, error) {
	if _, err := remote.New(remoteName, url, tok).Inbox(ctx); err != nil {
		switch {
		case remote.IsStatus(err, 401):
			return "", &failedError{msg: fmt.Sprintf("remote %s refused the person token (unknown, or the person was removed)", remoteName),
				hint: "ask the server's operator for one: nerve khala user add NAME"}
		case remote.IsForbidden(err):
			return "", &failedError{msg: fmt.Sprintf("that is an agent's token, not a person's, for remote %s", remoteName),
				hint: "a person's token comes from: nerve khala user add NAME"}
		}
		return "", err
	}
	if err := remote.SavePersonToken(home, remoteName, tok); err != nil {
		return "", err
	}
	return fmt.Sprintf("accepted by %s; stored in %s (0600)", remoteName, displayPath(filepath.Join(home, "person-tokens", remoteName))), nil
}
