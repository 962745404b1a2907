package daemon

import (
	"context"
	"fmt"
	"path"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// The serving machine decides what it fetches: a cloud thread may name any
// repository, a file:// path on this machine included, and serving it
// would clone it, run an agent in it and push a branch into it with this
// machine's credentials. A turn whose repository this machine does not
// fetch (remotes.NAME.repos, default: the one its workflow declares) runs
// nothing here. Each claim tells Khala what this machine fetches
// (claimRepos), so Khala hands it no such turn; one that comes anyway
// (from a Khala older than the filter, or a turn queued before its
// upgrade) is answered at once with error kind workspace, which the
// thread's messages and trace show: giving the turn back instead would
// have this daemon claim it again at once.

// claimRepos is what a claim on remote remoteName says this machine
// fetches: the globs of remotes.NAME.repos, or, without any, the
// repositories the threads' own workflows declare.
func (d *Daemon) claimRepos(remoteName string) *api.RepoFilter {
	return &api.RepoFilter{Globs: d.config().Remotes[remoteName].Repos}
}

// repoRefusal says why this machine does not fetch turn t's repository, or
// "" when it does (or the turn has no workspace).
func (d *Daemon) repoRefusal(ctx context.Context, cl *remote.Client, remoteName string, t api.Turn) string {
	if t.Workspace == nil {
		return ""
	}
	repo, agent := t.Workspace.Repo, d.config().Agent.Name
	if globs := d.config().Remotes[remoteName].Repos; len(globs) > 0 {
		for _, g := range globs {
			if ok, _ := path.Match(g, repo); ok {
				return ""
			}
		}
		return fmt.Sprintf("agent %s does not fetch repository %s: it is not among remotes.%s.repos of its nerve.yaml", agent, repo, remoteName)
	}
	def := d.remoteDef(ctx, cl, remoteName, t)
	if def != nil && def.Workspace != nil && def.Workspace.Repo == repo {
		return ""
	}
	declared := "none"
	if def != nil && def.Workspace != nil && def.Workspace.Repo != "" {
		declared = def.Workspace.Repo
	}
	return fmt.Sprintf("agent %s does not fetch repository %s: workflow %s declares %s, and an agent fetches only what its workflows declare unless remotes.%s.repos in its nerve.yaml allows more",
		agent, repo, t.Workflow, declared, remoteName)
}

// refusedRepo is the answer of a turn whose repository this machine does
// not fetch: nothing ran.
func (r *runner) refusedRepo(remoteName string, t api.Turn, adapterName, why string) api.Response {
	r.d.log.Warn("refused a turn: its repository is not one this machine fetches", "remote", remoteName, "turn", t.Turn, "repo", t.Workspace.Repo, "why", why)
	return api.Response{Claim: t.Claim, Adapter: adapterName, Error: &workflow.MessageError{Kind: "workspace", Message: why}}
}
