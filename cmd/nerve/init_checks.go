package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/config/validation"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/internal/sandbox"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// availability checks what this agent is configured to use. What a
// workflow, sense or reflex names is needed; the rest are warnings.
func availability(ctx context.Context, f *Factory, cfg *config.Config) []check {
	var out []check
	neededAdapters := map[string]string{} // adapter -> who needs it
	gitNeededBy := ""                     // the first workflow that declares a workspace
	for _, e := range validation.Check(cfg).Workflows {
		if e.Def != nil && e.Def.Workspace != nil && gitNeededBy == "" {
			gitNeededBy = "workflow " + e.Name
		}
		if len(e.Problems) > 0 {
			out = append(out, check{Name: "workflow " + e.Name, Kind: "workflow", Needed: true,
				Detail: firstLine(e.Problems.Error()), Hint: "nerve validate shows every problem"})
		} else {
			out = append(out, check{Name: "workflow " + e.Name, Kind: "workflow", OK: true, Needed: true, Detail: displayPath(e.File)})
		}
		if e.Def == nil || e.Def.Binding != workflow.BindingLocal {
			continue
		}
		for role, r := range e.Def.Roles {
			if e.Def.IsHuman(role) {
				continue // a person answers it: no adapter
			}
			neededAdapters[r.Adapter] = "workflow " + e.Name + " role " + role
		}
	}
	neededRemotes := map[string]bool{}
	for _, s := range cfg.Senses {
		if s.Kind == "khala" {
			neededRemotes[s.Remote] = true
		}
	}
	for _, r := range cfg.Reflexes {
		if r.Do == "turn" {
			neededAdapters[r.Adapter] = "reflex on " + r.On
		}
	}
	names := map[string]bool{}
	for n := range cfg.Adapters {
		names[n] = true
	}
	for n := range neededAdapters {
		names[n] = true
	}
	pathEnv := os.Getenv("PATH")
	if f.Executable != "" {
		pathEnv = filepath.Dir(f.Executable) + string(os.PathListSeparator) + pathEnv
	}
	for _, n := range sortedNames(names) {
		out = append(out, adapterCheck(ctx, f, cfg, n, neededAdapters[n], pathEnv, adapter.Check))
	}
	out = append(out, foundCLIs(ctx, f, cfg, names, pathEnv)...)
	for _, n := range sortedNames(cfg.Remotes) {
		out = append(out, remoteCheck(ctx, cfg, n, neededRemotes[n]))
	}
	if gitNeededBy != "" {
		out = append(out, gitCheck(ctx, f, gitNeededBy))
	}
	if cfg.Extract != nil {
		out = append(out, endpointCheck(ctx, "extract", cfg.Extract))
	}
	return append(out, sandboxCheck(cfg))
}

// sandboxCheck says where turns run. auto falling back to none is a
// warning: a shared queue's prompts would run as the owner; bwrap where
// it does not work is an error, since every turn would fail.
func sandboxCheck(cfg *config.Config) check {
	st := daemon.SandboxStatusOf(cfg)
	c := check{Name: "sandbox", Kind: "sandbox", Needed: st.Mode == sandbox.ModeBwrap}
	switch {
	case st.Warning != nil:
		c.Detail = *st.Warning
		c.Hint = "install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap), or set daemon.sandbox: none to run turns unsandboxed knowingly"
	case st.Effective == sandbox.ModeNone:
		c.OK = true
		c.Detail = "off (daemon.sandbox: none): turns run as you, with all you can read"
	default:
		c.OK = true
		c.Detail = "bwrap · network " + st.Network + " · $HOME empty but for sandbox.read, NERVE_HOME hidden"
	}
	return c
}

// gitCheck checks the git binary a workspace needs: present on PATH, and
// its version.
func gitCheck(ctx context.Context, f *Factory, neededBy string) check {
	c := check{Name: "git", Kind: "git", Needed: true}
	version, err := newWorkspaceManager(f).CheckGit(ctx)
	if err != nil {
		c.Detail = fmt.Sprintf("%v (needed by %s, which declares a workspace)", err, neededBy)
		c.Hint = "install git (https://git-scm.com) or put it on PATH"
		return c
	}
	c.OK = true
	c.Detail = "git " + version + " (for the workspaces of " + neededBy + ")"
	return c
}

func adapterCheck(ctx context.Context, f *Factory, cfg *config.Config, name, neededBy, pathEnv string,
	probe func(context.Context, string, adapter.Spec, string) adapter.Availability) check {
	c := check{Name: "adapter " + name, Kind: "adapter", Needed: neededBy != ""}
	ac, ok := cfg.AdapterConfig(name)
	if !ok {
		c.Detail = fmt.Sprintf("unknown adapter (named by %s)", neededBy)
		c.Hint = "define it under adapters: in nerve.yaml, or use a built-in one: " + strings.Join(adapter.Types(), ", ")
		return c
	}
	if ac.Type == "exec" && len(ac.Command) > 0 && ac.Command[0] == "nerve" && f.Executable != "" {
		ac.Command = append([]string{f.Executable}, ac.Command[1:]...)
	}
	av := probe(ctx, name, ac, pathEnv)
	if !av.OK {
		c.Detail, c.Hint = av.Problem, av.Hint
		if neededBy != "" {
			c.Detail += " (needed by " + neededBy + ")"
		}
		return c
	}
	c.OK = true
	what := av.Version
	if what == "" {
		what = av.Type
	}
	c.Detail = fmt.Sprintf("%s at %s · permissions %s · timeout %s", what, displayPath(av.Path), av.Permissions, av.Timeout)
	if ac.Sandbox != "" {
		c.Detail += " · sandbox " + ac.Sandbox
	}
	return c
}

func remoteCheck(ctx context.Context, cfg *config.Config, name string, needed bool) check {
	c := check{Name: "remote " + name, Kind: "remote", Needed: needed}
	cl, err := remote.ForConfig(cfg, name)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	cl.Retries, cl.Timeout = 0, 5*time.Second
	version, err := cl.Health(ctx)
	if err != nil {
		c.Detail, c.Hint = err.Error(), hintOf(err)
		return c
	}
	if cl.PersonToken != "" && cl.Token == cl.PersonToken && !needed {
		return personRemoteCheck(ctx, c, cl, version)
	}
	if cl.Token == "" {
		c.Detail = fmt.Sprintf("%s reachable (khala %s), but this agent has no token for it", cl.BaseURL, version)
		c.Hint = fmt.Sprintf("enroll: nerve init --remote %s=%s --enroll-token TOKEN", name, cl.BaseURL)
		return c
	}
	agent, err := cl.Me(ctx)
	if err != nil {
		c.Detail, c.Hint = err.Error(), hintOf(err)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s (khala %s) accepts this agent as %s", cl.BaseURL, version, agent)
	return c
}

// personRemoteCheck checks a remote this machine holds only a person's
// token for (no agent is enrolled, and no sense serves it): a person's
// machine, to which the agent's checks do not apply.
func personRemoteCheck(ctx context.Context, c check, cl *remote.Client, version string) check {
	if _, err := cl.Inbox(ctx); err != nil {
		c.Detail, c.Hint = err.Error(), hintOf(err)
		if remote.IsStatus(err, http.StatusUnauthorized) {
			c.Detail = fmt.Sprintf("%s (khala %s) refused the person token stored for it (unknown, or the person was removed)", cl.BaseURL, version)
			c.Hint = fmt.Sprintf("store a new one: nerve init --remote %s=%s --person-token TOKEN", cl.Name, cl.BaseURL)
		}
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s (khala %s) accepts the person token stored for it, to answer human turns", cl.BaseURL, version)
	return c
}

// endpointCheck asks an OpenAI-compatible endpoint for its models.
func endpointCheck(ctx context.Context, name string, e *config.Endpoint) check {
	c := check{Name: name, Kind: "endpoint"}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := strings.TrimRight(e.BaseURL, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	if e.APIKeyEnv != "" {
		key := os.Getenv(e.APIKeyEnv)
		if key == "" {
			c.Detail = fmt.Sprintf("%s is not set", e.APIKeyEnv)
			c.Hint = "export " + e.APIKeyEnv + " in the daemon's environment"
			return c
		}
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.Detail = fmt.Sprintf("%s: %v", url, err)
		return c
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		c.Detail = fmt.Sprintf("%s answered %s", url, resp.Status)
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s reachable (model %s)", e.BaseURL, e.Model)
	return c
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// foundCLIs checks the built-in agent CLIs found on PATH that nerve.yaml
// does not name (named: the adapters checked already), so the owner of a
// new machine sees what it can drive, with versions and postures. An npm
// package's version is read from its package.json (a node program takes
// seconds to answer --version, and init runs often); the others answer
// --version, three at a time, so a dozen starting at once on a small
// machine do not overrun the version timeout.
func foundCLIs(ctx context.Context, f *Factory, cfg *config.Config, named map[string]bool, pathEnv string) []check {
	var types []string
	for _, t := range adapter.Types() {
		if t != "exec" && !named[t] && adapter.Installed(t, pathEnv) {
			types = append(types, t)
		}
	}
	out := make([]check, len(types))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 3)
	for i, t := range types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			out[i] = adapterCheck(ctx, f, cfg, t, "", pathEnv, adapter.CheckInstalled)
		}()
	}
	wg.Wait()
	return out
}
