package khala

import (
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

func TestClaimWorkspace(t *testing.T) { eachBackend(t, testClaimWorkspace) }

// A claimed turn says its thread's workspace, at the head its turn starts
// from: a turn taken from the queue, and one handed over in the commit of
// the answer that moved the head. A thread without one says nothing.
func testClaimWorkspace(t *testing.T, bk backend) {
	ts := bk.server(t)
	author, reviewer := ts.agent("author"), ts.agent("reviewer")
	author.putWorkflow(pairWF)
	plain := author.start("pair", nil, "")
	if tk := author.claimOne(); tk.Thread != plain || tk.Workspace != nil {
		t.Fatalf("a thread without a workspace: %+v", tk)
	}
	var started startResponse
	author.must("POST", "/v1/workflows/pair/threads", map[string]any{"input": map[string]any{"turns": 3},
		"workspace": map[string]any{"repo": "https://git.example.com/app.git", "base": commit0}}, 201, &started)
	id := started.Thread
	want := workflow.Workspace{Repo: "https://git.example.com/app.git", Base: commit0, Branch: "nerve/pair/" + id, Head: commit0}
	first := author.claim(map[string]any{"max": 1, "wait": "5s", "roles": []string{"author"}})
	if len(first) != 1 || first[0].Thread != id || first[0].Workspace == nil || *first[0].Workspace != want {
		t.Fatalf("claimed from the queue: %+v, want workspace %+v", first, want)
	}

	got := make(chan []api.Turn, 1)
	go func() { got <- reviewer.claim(map[string]any{"roles": []string{"reviewer"}, "wait": "5s"}) }()
	ts.waitParked(t, 1)
	author.must("POST", "/v1/turns/"+first[0].Turn+"/response", map[string]any{"claim": first[0].Claim, "content": "edited",
		"commit": commit1, "changes": map[string]any{"files": 1, "insertions": 1, "deletions": 0}}, 200, nil)
	handed := <-got
	want.Head = commit1
	if len(handed) != 1 || handed[0].Step != 2 || handed[0].Workspace == nil || *handed[0].Workspace != want {
		t.Fatalf("handed over: %+v, want workspace %+v", handed, want)
	}
}
