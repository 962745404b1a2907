package khala

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// Khala records a thread's workspace and moves its head; it never runs
// git. The agents' daemons make the branch's commits and push them; an
// answer's commit is where the branch is on the shared remote after that
// turn, so it becomes the thread's head.

// startWorkspace checks a start request's workspace (raw: the JSON, empty
// or null when none was given) against the definition. It returns the
// workspace with its branch left empty (the default needs the thread's
// id: engine.StartRequest) and the branches the default must not be, or nil when
// the thread has none.
func startWorkspace(def *workflow.Definition, raw json.RawMessage) (*workflow.Workspace, []string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		if def.Workspace != nil {
			return nil, nil, badRequest("workflow %s declares a workspace: give workspace.base, the commit the thread starts from ('nerve workflow run --base REV' resolves it)", def.Name)
		}
		return nil, nil, nil
	}
	var req api.StartWorkspace
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, nil, badRequest("workspace: %s; want {\"repo\", \"base\", \"branch\"?, \"taken\"?}", strings.TrimPrefix(jsonErr(err), "json: "))
	}
	if len(req.Taken) > workflow.MaxTakenBranches {
		return nil, nil, badRequest("workspace.taken names %d branches; at most %d", len(req.Taken), workflow.MaxTakenBranches)
	}
	ws, err := checkStartWorkspace(def, req)
	return ws, req.Taken, err
}

// checkStartWorkspace checks a decoded start workspace.
func checkStartWorkspace(def *workflow.Definition, req api.StartWorkspace) (*workflow.Workspace, error) {
	ws := &workflow.Workspace{Repo: req.Repo, Base: strings.ToLower(req.Base), Branch: req.Branch}
	if ws.Repo == "" && def.Workspace != nil {
		ws.Repo = def.Workspace.Repo
	}
	if ws.Repo == "" {
		return nil, badRequest("workspace.repo is required: workflow %s names no repository; give the git URL every serving agent can fetch from and push to", def.Name)
	}
	if err := workflow.CheckSharedRepo(ws.Repo); err != nil {
		return nil, badRequest("workspace.repo %q: %s", ws.Repo, err)
	}
	switch {
	case ws.Base == "":
		return nil, badRequest("workspace.base is required: the commit the thread starts from, a full commit id")
	case !workflow.IsCommitID(ws.Base):
		return nil, badRequest("workspace.base %q: want a full commit id (40 hex digits); resolve the revision first ('git rev-parse REV'), and push it if the remote lacks it", req.Base)
	}
	if ws.Branch != "" {
		if err := workflow.CheckBranch(ws.Branch); err != nil {
			return nil, badRequest("workspace.branch %q is not a branch name git accepts: %s", ws.Branch, err)
		}
		if err := checkOwnBranch(ws.Branch, req.Taken); err != nil {
			return nil, err
		}
	}
	ws.Head = ws.Base
	return ws, nil
}

// checkChanges checks an answer's commit and changes.
func checkChanges(commit string, ch *workflow.Changes) error {
	if commit != "" && !workflow.IsCommitID(commit) {
		return badRequest("commit %q: want a full commit id (40 hex digits)", commit)
	}
	if ch != nil && (ch.Files < 0 || ch.Insertions < 0 || ch.Deletions < 0) {
		return badRequest("changes: files, insertions and deletions must not be negative")
	}
	return nil
}

// checkOwnBranch refuses an explicit branch a thread cannot own. The
// serving daemons push with the serving machines' credentials, so a
// thread's branch lives under nerve/, where no branch of the remote's own
// (main, a release) is; one the client says the remote has (taken) is
// refused by name. Khala runs no git: a branch under nerve/ that the remote
// has and the client did not say is refused by the daemons, which create
// a thread's branch by its first push only (workspace.firstPush).
func checkOwnBranch(branch string, taken []string) error {
	if !strings.HasPrefix(branch, workflow.BranchNamespace) {
		return badRequest("workspace.branch %q: a cloud thread's branch is under %s (e.g. %s%s); its serving agents push it with their own credentials, so it never names a branch of the repository's own",
			branch, workflow.BranchNamespace, workflow.BranchNamespace, branch)
	}
	if slices.Contains(taken, branch) {
		return &apiError{http.StatusConflict, codeBranchTaken, fmt.Sprintf("workspace.branch %q exists on the shared remote already (workspace.taken names it); a thread's branch is made by its first push: name another", branch)}
	}
	return nil
}

// codeBranchTaken is the 409 of a thread whose branch the shared remote
// has already.
const codeBranchTaken = "branch_taken"
