package daemon

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// execMerge runs a merge turn of a cloud thread (api.Turn.Merge): Khala
// runs no git, so when a parallel round's last answer is in it asks a
// serving daemon to merge the round's commits, kept under their turn refs,
// into the thread branch in step order, on this machine's mirror, and to
// push the branch with a lease. No adapter runs. The answer carries the
// branch's new head; a conflict is kind merge with the conflicting step and
// its files, any other failure kind workspace. ok is false when the turn
// was interrupted (claim lost, shutdown) and has no answer.
func (r *runner) execMerge(ctx context.Context, remoteName string, t api.Turn) (api.Response, bool) {
	resp := api.Response{Claim: t.Claim}
	w, work := t.Workspace, t.Merge
	if w == nil || work == nil || !workflow.IsCommitID(work.From) || len(work.Turns) == 0 {
		resp.Error = &workflow.MessageError{Kind: workspace.KindWorkspace,
			Message: "the merge turn names no workspace, no head to merge into or no commits: nothing was merged"}
		return resp, true
	}
	key := historyKey(remoteName, t)
	r.trees.begin(key) // the thread's worktree, where the merge runs
	defer r.trees.end(key)
	turns := make([]workspace.Parallel, len(work.Turns))
	for i, mt := range work.Turns {
		turns[i] = workspace.Parallel{Step: mt.Step, Commit: mt.Commit}
	}
	mt := workspace.Turn{Workspace: workspace.Workspace{Repo: w.Repo, Cloud: true, Base: w.Base, Branch: w.Branch, Head: work.From},
		Key: key}
	merged, err := r.ws.MergeRound(ctx, mt, r.d.config().Agent.Name, turns)
	if ctx.Err() != nil {
		return api.Response{}, false
	}
	resp.Commit = merged.Commit
	if err == nil {
		resp.Content = "merged steps " + joinSteps(merged.Steps)
		return resp, true
	}
	msg := err.Error()
	var we *workspace.Error
	if errors.As(err, &we) && we.Kind == workspace.KindMerge {
		resp.Step = we.Step
		if len(we.Files) > 0 {
			msg = strings.Join(we.Files, ", ")
		}
	}
	resp.Error = &workflow.MessageError{Kind: workspace.KindOf(err), Message: msg}
	r.d.log.Warn("merge parallel turns", "thread", t.Thread, "remote", remoteName, "step", resp.Step, "err", err)
	return resp, true
}

func joinSteps(steps []int) string {
	s := make([]string, len(steps))
	for i, n := range steps {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
