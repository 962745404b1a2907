package workflow_test

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

const base = "1111111111111111111111111111111111111111"

// runWS runs moderator on a thread with a workspace at base.
func runWS(t *testing.T, moderator string, turn workflow.TurnFunc, merge workflow.MergeFunc) (*workflow.Thread, []workflow.Message) {
	t.Helper()
	st := openStore(t)
	d := parse(t, moderator)
	th := newThread(t, st, d)
	th.Workspace = &workflow.Workspace{Repo: "/srv/app.git", Base: base, Branch: workflow.DefaultBranch(d.Name, th.ID), Head: base}
	e := &workflow.Engine{Store: st, Turn: turn, Agent: "test-agent", Merge: merge}
	if err := e.Run(context.Background(), d, th); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.Thread(th.ID)
	msgs, _ := st.Messages(th.ID)
	return stored, msgs
}

// committer commits as role a, and changes nothing as the others.
func committer(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
	m := workflow.Message{Content: turn.Role}
	if turn.Role == "a" {
		m.Commit, m.Changes = "c-a", &workflow.Changes{Files: 1, Insertions: 2, Deletions: 0}
	} else {
		m.Changes = &workflow.Changes{}
	}
	return m
}

func TestWorkspaceHeadFollowsCommits(t *testing.T) {
	mod := `$count(messages) = 0 ? {"role": "a"} :
		$count(messages) = 1 ? (last.changes.files = 0 ? {"fail": "a changed nothing"} : {"role": "b"}) :
		{"done": true, "result": {"head": workspace.head, "branch": workspace.branch, "base": workspace.base,
			"b_commit": last.commit, "b_files": last.changes.files, "a_insertions": messages[0].changes.insertions}}`
	th, msgs := runWS(t, mod, committer, nil)
	if th.Status != workflow.StatusCompleted {
		t.Fatalf("thread %s: %s", th.Status, th.Error)
	}
	want := map[string]any{"head": "c-a", "branch": "nerve/w/" + th.ID, "base": base, "b_commit": nil, "b_files": float64(0), "a_insertions": float64(2)}
	if !reflect.DeepEqual(th.Result, want) {
		t.Fatalf("the moderator saw %v, want %v", th.Result, want)
	}
	if th.Workspace == nil || th.Workspace.Head != "c-a" || th.Workspace.Base != base {
		t.Fatalf("stored workspace %+v, want head c-a", th.Workspace)
	}
	if msgs[0].Commit != "c-a" || *msgs[0].Changes != (workflow.Changes{Files: 1, Insertions: 2}) || msgs[1].Commit != "" {
		t.Fatalf("stored messages %+v", msgs)
	}
}

func TestModeratorRefusesATurnThatChangedNothing(t *testing.T) {
	nothing := func(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
		return workflow.Message{Content: "looked, changed nothing", Changes: &workflow.Changes{}}
	}
	th, _ := runWS(t, `last = null ? {"role": "a"} : last.changes.files = 0 ? {"fail": "a changed nothing"} : {"done": true}`, nothing, nil)
	if th.Status != workflow.StatusFailed || th.Error != "a changed nothing" || th.Workspace.Head != base {
		t.Fatalf("thread %s (%s), head %s", th.Status, th.Error, th.Workspace.Head)
	}
}

func TestDocumentWithoutWorkspace(t *testing.T) {
	th, _, _ := run(t, `last = null ? {"role": "a"} : {"done": true, "result": [$exists(workspace), $exists(last.commit), $exists(last.changes)]}`, echo)
	if !reflect.DeepEqual(th.Result, []any{false, false, false}) || th.Workspace != nil {
		t.Fatalf("without a workspace the document has none and messages no commit: %v", th.Result)
	}
	th, _ = runWS(t, `last = null ? {"role": "b"} : {"done": true, "result": [$exists(workspace), last.commit = null, last.changes = null]}`, echo, nil)
	if !reflect.DeepEqual(th.Result, []any{true, true, true}) {
		t.Fatalf("with a workspace, commit and changes are null when absent: %v", th.Result)
	}
}

func TestParallelRoundMergedInStepOrder(t *testing.T) {
	par := func(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
		if turn.Role != "b" {
			time.Sleep(30 * time.Millisecond) // b answers first and is stored before the round ends
		}
		return workflow.Message{Content: turn.Role, Commit: "c-" + turn.Role, Changes: &workflow.Changes{Files: 1}}
	}
	var (
		mu    sync.Mutex
		calls [][]int
		heads []string
	)
	merge := func(_ context.Context, th *workflow.Thread, round []workflow.Message) string {
		mu.Lock()
		defer mu.Unlock()
		var steps []int
		for _, m := range round {
			steps = append(steps, m.Step)
		}
		calls, heads = append(calls, steps), append(heads, th.Workspace.Head)
		// a merges; b conflicts (the branch stays at a's merge); c merges.
		round[1].Error = &workflow.MessageError{Kind: workflow.ErrorKindMerge, Message: "README.md, main.go"}
		return "merge-of-a-and-c"
	}
	mod := `$count(messages) = 0 ? [{"role": "a"}, {"role": "b"}, {"role": "c"}] :
		{"done": true, "result": {"head": workspace.head, "conflict": messages[error.kind = "merge"].step, "files": messages[step = 2].error.message}}`
	th, msgs := runWS(t, mod, par, merge)
	if len(calls) != 1 || !slices.Equal(calls[0], []int{1, 2, 3}) || heads[0] != base {
		t.Fatalf("merge called with %v from %v, want once with steps [1 2 3] from the base", calls, heads)
	}
	want := map[string]any{"head": "merge-of-a-and-c", "conflict": float64(2), "files": "README.md, main.go"}
	if !reflect.DeepEqual(th.Result, want) || th.Workspace.Head != "merge-of-a-and-c" {
		t.Fatalf("result %v, head %s; want %v", th.Result, th.Workspace.Head, want)
	}
	if len(msgs) != 3 || msgs[1].Error == nil || msgs[1].Error.Kind != "merge" || msgs[0].Error != nil {
		t.Fatalf("the conflict must be stored on step 2's message: %+v", msgs)
	}
}

func TestParallelRoundWithoutMergeKeepsHead(t *testing.T) {
	mod := `$count(messages) = 0 ? [{"role": "a"}, {"role": "b"}] : {"done": true, "result": workspace.head}`
	th, _ := runWS(t, mod, committer, nil)
	if th.Result != base || th.Workspace.Head != base {
		t.Fatalf("with no Merge a parallel round leaves the head: %v", th.Result)
	}
}

// A round answered in full but never routed (the daemon stopped while the
// moderator ran) is merged again when the thread resumes.
func TestResumedRoundIsMergedAgain(t *testing.T) {
	st := openStore(t)
	d := parse(t, `{"done": true, "result": workspace.head}`)
	th := newThread(t, st, d)
	th.Workspace = &workflow.Workspace{Repo: "/srv/app.git", Base: base, Branch: "b", Head: base}
	th.Step, th.Pending = 2, []workflow.Turn{{Step: 1, Role: "a"}, {Step: 2, Role: "b"}}
	now := time.Now().UTC()
	err := st.Commit(workflow.Update{Thread: th, Messages: []workflow.Message{
		{Step: 1, Role: "a", Commit: "c-a", At: now}, {Step: 2, Role: "b", Commit: "c-b", At: now}}})
	if err != nil {
		t.Fatal(err)
	}
	var merged []string
	merge := func(_ context.Context, _ *workflow.Thread, round []workflow.Message) string {
		for _, m := range round {
			merged = append(merged, m.Commit)
		}
		return "merged"
	}
	e := &workflow.Engine{Store: st, Turn: echo, Agent: "test-agent", Merge: merge}
	if err := e.Run(context.Background(), d, th); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.Thread(th.ID)
	if !slices.Equal(merged, []string{"c-a", "c-b"}) || stored.Result != "merged" || stored.Workspace.Head != "merged" {
		t.Fatalf("merged %v, result %v, head %s", merged, stored.Result, stored.Workspace.Head)
	}
}
