package reflex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/internal/sandbox"
)

// A TurnService adds to one turn's sandbox and ends with it (the network
// proxy, the per-turn socket). The Executor calls each before the adapter
// runs, in every posture: without a sandbox only Extra.Env is used (so
// the per-turn socket is the turn's channel to nerve either way), Binds
// and Prefix are ignored. end is called when the turn is over; it may be
// nil.
type TurnService func(ctx context.Context, t *Turn, adapterName string) (extra sandbox.Extra, end func(), err error)

// builtinEnv are the variables a sandboxed CLI always gets from the
// daemon's environment, besides sandbox.env and nerve's own.
var builtinEnv = []string{"HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "PATH"}

// sandboxAvailable is sandbox.Available; tests of this package replace it.
var sandboxAvailable = sandbox.Available

// ErrNoSandbox fails a turn whose adapter must run in bwrap (sandbox:
// bwrap) on a machine where bwrap does not work.
var ErrNoSandbox = errors.New("sandbox: bwrap does not work here")

// sandboxed reports whether adapter name's turns run in bwrap: mode
// bwrap always (an error when it does not work), auto where it works.
func sandboxed(cfg *config.Config, name string) (bool, error) {
	switch cfg.SandboxMode(name) {
	case sandbox.ModeNone:
		return false, nil
	case sandbox.ModeBwrap:
		if err := sandboxAvailable(); err != nil {
			return false, fmt.Errorf("%w: %v (adapter %s has sandbox: bwrap; install bubblewrap, or set sandbox: none)", ErrNoSandbox, err, name)
		}
		return true, nil
	default:
		return sandboxAvailable() == nil, nil
	}
}

// turnServices runs every per-turn service for t and merges what they
// add; end ends them all (also when one failed).
func (x *Executor) turnServices(ctx context.Context, t *Turn) (extra sandbox.Extra, end func(), err error) {
	var ends []func()
	end = func() {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i]()
		}
	}
	for _, svc := range x.deps.TurnServices {
		e, stop, err := svc(ctx, t, t.Adapter)
		if stop != nil {
			ends = append(ends, stop)
		}
		if err != nil {
			return extra, end, err
		}
		extra.Merge(e)
	}
	return extra, end, nil
}

// sandboxSpec is the turn's sandbox: env is the turn's own variables
// (NERVE_*, PATH), snap its thread snapshot.
func (x *Executor) sandboxSpec(cfg *config.Config, ac config.Adapter, workdir, snap string, env []string, extra sandbox.Extra) (*sandbox.Spec, error) {
	home, _ := os.UserHomeDir()
	s := &sandbox.Spec{Workdir: workdir, Home: home, Network: cfg.SandboxNetwork(), Extra: extra}
	if x.deps.Home != "" {
		s.Hide = []string{x.deps.Home}
	}
	for _, p := range cfg.Sandbox.Read {
		s.Read = append(s.Read, config.ExpandHome(p))
	}
	if snap != "" {
		s.Read = append(s.Read, snap)
	}
	if x.deps.Executable != "" {
		s.Executables = []string{x.deps.Executable}
	}
	s.State = gitBinds(workdir)
	state, err := x.stateBinds(cfg, ac, home)
	if err != nil {
		return nil, err
	}
	s.State = append(s.State, state...)
	for _, name := range append(builtinEnv, cfg.Sandbox.Env...) {
		if v, ok := os.LookupEnv(name); ok {
			s.Env = append(s.Env, name+"="+v)
		}
	}
	s.Env = append(s.Env, env...)
	switch {
	case slices.Contains(s.Hide, filepath.Clean(workdir)):
		x.deps.Log.Warn("sandbox: the turn's workdir is NERVE_HOME, which the sandbox hides: the agent sees an empty directory; start the thread elsewhere (--workdir)", "workdir", workdir)
	case s.Covers(workdir):
		x.deps.Log.Warn("sandbox: the turn's workdir holds HOME or NERVE_HOME, so the agent sees all that lies under it (NERVE_HOME aside); start the thread in a project directory", "workdir", workdir)
	}
	return s, nil
}

// stateBinds are the CLI's state paths: with share_state the owner's
// real ones, else NERVE_HOME/sandbox/TYPE/PATH (one per CLI, shared by
// its instances, so a login there serves them all), made when missing.
func (x *Executor) stateBinds(cfg *config.Config, ac config.Adapter, home string) ([]sandbox.Bind, error) {
	if home == "" {
		return nil, nil
	}
	var out []sandbox.Bind
	for _, p := range adapter.StatePaths(ac.Type) {
		dst := filepath.Join(home, p.Rel)
		src := dst
		if !cfg.Sandbox.ShareState {
			src = filepath.Join(x.deps.Home, "sandbox", ac.Type, p.Rel)
		}
		if err := ensureState(src, p.File); err != nil {
			return nil, fmt.Errorf("sandbox: prepare %s's state %s: %w", ac.Type, src, err)
		}
		out = append(out, sandbox.Bind{Src: src, Dst: dst, Write: true})
	}
	return out, nil
}

// ensureState makes a state directory, or a state file holding an empty
// JSON object (what claude's ~/.claude.json starts as), when missing.
func ensureState(p string, file bool) error {
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if !file {
		return os.MkdirAll(p, 0o700)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString("{}\n")
	return errors.Join(err, f.Close())
}

// enclose runs the turn's services and builds its sandbox (nil when the
// adapter runs without one). env is the turn's own variables; it comes
// back with the services' added. NERVE_HOME stays named (the example
// agent checks its workdir against it) but is an empty, read-only
// directory inside.
// end ends the services; it is never nil.
func (x *Executor) enclose(ctx context.Context, cfg *config.Config, t *Turn, workdir, snap string, env []string) ([]string, *sandbox.Spec, func(), error) {
	at := *t
	at.Workdir = workdir // the services see where the turn works: its worktree or scratch directory too
	extra, end, err := x.turnServices(ctx, &at)
	if err != nil {
		return nil, nil, end, fmt.Errorf("start the turn's services: %w", err)
	}
	env = append(env, extra.Env...)
	box, err := sandboxed(cfg, t.Adapter)
	if err != nil || !box {
		return env, nil, end, err
	}
	ac, _ := cfg.AdapterConfig(t.Adapter)
	spec, err := x.sandboxSpec(cfg, ac, workdir, snap, env, extra)
	return env, spec, end, err
}

// gitBinds let git work in a worktree whose repository lives elsewhere
// (a workspace's, under NERVE_HOME/repos): the worktree's own git
// directory read-write (its index, HEAD), the repository's common one
// read-only (objects, refs: nerve itself commits and publishes).
func gitBinds(workdir string) []sandbox.Bind {
	b, err := os.ReadFile(filepath.Join(workdir, ".git"))
	if err != nil {
		return nil // a directory (an ordinary clone) or no git at all
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return nil
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(workdir, gitdir)
	}
	out := []sandbox.Bind{{Src: gitdir, Dst: gitdir, Write: true}}
	if c, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common := strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		common = filepath.Clean(common)
		out = append([]sandbox.Bind{{Src: common, Dst: common}}, out...)
	}
	return out
}
