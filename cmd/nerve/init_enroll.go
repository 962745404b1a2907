package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/remote"
)

// initName is the name init enrolls this agent as, read before anything is
// written. For a nerve.yaml init is about to write it is --name's or the
// host's; for one that exists it is the file's, unless --name comes with
// an enrollment while this agent holds no token for any remote: that is a
// re-run after a refused name, and the file's agent.name is changed once
// the remote has accepted the new one. Otherwise --name is not used, and
// unused says so.
func initName(f *Factory, opts *initOptions, cfgPath, home string) (name string, rename bool, unused string, err error) {
	if _, err := os.Stat(cfgPath); errors.Is(err, fs.ErrNotExist) {
		name = opts.Name
		if name == "" {
			name = config.Defaults(home).Agent.Name
		}
		if env := f.Getenv("NERVE_AGENT_NAME"); env != "" {
			name = env // it wins over the file init writes, as config.Load has it
		}
		return name, false, "", nil
	}
	cfg, err := config.Load(config.LoadOptions{File: f.configFile, Getenv: f.Getenv})
	if err != nil {
		return "", false, "", err
	}
	if opts.Name == "" || opts.Name == cfg.Agent.Name {
		return cfg.Agent.Name, false, "", nil
	}
	if opts.EnrollToken != "" && !enrolledAnywhere(home) {
		return opts.Name, true, "", nil
	}
	// init never overwrites nerve.yaml (DESIGN.md), so say why --name did nothing.
	unused = fmt.Sprintf("--name %s not used: %s names this agent %s and was left as it is; edit agent.name there to rename it",
		opts.Name, displayPath(cfgPath), cfg.Agent.Name)
	return cfg.Agent.Name, false, unused, nil
}

// enrolledAnywhere reports whether this agent holds a token for a remote:
// others may know it by its name.
func enrolledAnywhere(home string) bool {
	entries, _ := os.ReadDir(filepath.Join(home, "tokens"))
	for _, e := range entries {
		if e.Type().IsRegular() {
			return true
		}
	}
	return false
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
