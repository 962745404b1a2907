package engine

import (
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// markRepo copies thread th's workspace repository onto turn t, and
// whether def declares that very repository, so a claim can leave the
// turn to the machines that fetch it (khaladb.RepoFilter) without reading
// the thread.
func markRepo(t *khaladb.Turn, def *workflow.Definition, th *khaladb.Thread) {
	if th.Workspace == nil {
		return
	}
	t.Repo = th.Workspace.Repo
	t.RepoDeclared = def != nil && def.Workspace != nil && def.Workspace.Repo == t.Repo
}
