package workspace

import (
	"strings"
	"testing"
)

// A cloud thread named after a branch the remote has (its main, at the
// thread's base) is refused before its agent runs, and the remote's
// branch stays where it is: the thread did not create it.
func TestCloudThreadCannotTakeAnExistingBranch(t *testing.T) {
	remote := newRemote(t)
	main := gitT(t, remote, "rev-parse", "refs/heads/main")
	m := newManager(t)
	turn := Turn{Workspace: Workspace{Repo: remote, Cloud: true, Base: main, Branch: "main", Head: main}, Key: "origin/w#thread-1", Step: 1}
	_, err := m.Open(bg, turn)
	e := wantErr(t, err, ErrBranchExists, KindWorkspace)
	if !strings.Contains(e.Msg, `branch "main" exists`) || !strings.Contains(e.Msg, "did not create it") {
		t.Errorf("message: %s", e.Msg)
	}
	if got := branchAt(t, remote, "main"); got != main {
		t.Fatalf("the remote's main moved to %s", got)
	}
}
