package khala

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

var commit3 = strings.Repeat("3d", 20)

// splitWF runs a and b in parallel, then next, then ends.
const splitWF = `workflow: split
binding: cloud
workspace: {repo: https://git.example.com/app.git}
moderator: |
  $count(messages) = 0 ? [{"role": "a", "instruction": "go"}, {"role": "b", "instruction": "go"}]
  : $count(messages) = 2 ? {"role": "next", "instruction": "look"} : {"done": true}
roles:
  a: {prompt: p}
  b: {prompt: p}
  next: {prompt: p}
`

// The API's names of merge turns are the store's.
func TestMergeNames(t *testing.T) {
	if api.MergeRole != khaladb.MergeRole || api.MergeStepBase != khaladb.MergeStepBase {
		t.Fatal("khala/api and khaladb name merge turns differently")
	}
}

func TestParallelMergeTurn(t *testing.T) { eachBackend(t, testParallelMergeTurn) }

// A parallel round of a workspace thread: its turns are claimed as
// parallel and their answers leave the head alone; the last answer queues
// a merge turn (claimable whatever the claim's roles, carrying the round's
// head and commits in step order) instead of routing; the merge's answer
// moves the head and routes, and a conflict goes on the step's message.
func testParallelMergeTurn(t *testing.T, bk backend) {
	for _, tc := range []struct {
		name     string
		errStep  int // the step the merge's error names (0: no error)
		wantStep int // the message that gets it
	}{
		{"merged", 0, 0},
		{"conflict on step 1", 1, 1},
		{"conflict naming a step outside the round", 99, 2},
	} {
		conflict := tc.errStep != 0
		ts := bk.server(t)
		ag := ts.agent("worker")
		ag.putWorkflow(splitWF)
		var started startResponse
		ag.must("POST", "/v1/workflows/split/threads", map[string]any{"input": map[string]any{},
			"workspace": map[string]any{"base": commit0}}, 201, &started)
		id := started.Thread
		round := ag.claim(map[string]any{"max": 2, "wait": "5s"})
		if len(round) != 2 || !round[0].Parallel || !round[1].Parallel || round[0].Merge != nil {
			t.Fatalf("round: %+v", round)
		}
		// Answers in reverse step order; the head stays at the base.
		for i, commit := range []string{commit2, commit1} {
			tk := round[1-i]
			ag.must("POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "did",
				"commit": commit, "changes": map[string]any{"files": 1, "insertions": 1, "deletions": 0}}, 200, nil)
			if th := ag.thread(id); th.Workspace.Head != commit0 {
				t.Fatalf("a parallel answer moved the head to %s", th.Workspace.Head)
			}
		}
		mt := ag.claim(map[string]any{"max": 1, "wait": "5s", "roles": []string{"next"}})
		if len(mt) != 1 || mt[0].Role != api.MergeRole || mt[0].Merge == nil || mt[0].Parallel {
			t.Fatalf("merge turn: %+v", mt)
		}
		if m := mt[0].Merge; m.From != commit0 || len(m.Turns) != 2 || m.Turns[0] != (api.MergeTurn{Step: 1, Commit: commit1}) ||
			m.Turns[1] != (api.MergeTurn{Step: 2, Commit: commit2}) {
			t.Fatalf("merge work: %+v", m)
		}
		if th := ag.thread(id); th.Step != 2 {
			t.Fatalf("the merge turn counted as a step: %d", th.Step)
		}
		// Bad answers change nothing: a commit that is no commit id, a
		// stale claim.
		if code, body := ag.do("POST", "/v1/turns/"+mt[0].Turn+"/response", map[string]any{"claim": mt[0].Claim, "commit": "abc"}); code != 400 ||
			!strings.Contains(errMessage(body), "full commit id") {
			t.Fatalf("bad commit: %d %s", code, body)
		}
		if code, _ := ag.do("POST", "/v1/turns/"+mt[0].Turn+"/response", map[string]any{"claim": "stale", "commit": commit3}); code != 409 {
			t.Fatalf("stale claim: %d", code)
		}
		resp := map[string]any{"claim": mt[0].Claim, "commit": commit3}
		if conflict {
			resp = map[string]any{"claim": mt[0].Claim, "commit": commit1, "step": tc.errStep,
				"error": map[string]any{"kind": "merge", "message": "a.txt"}}
		}
		ag.must("POST", "/v1/turns/"+mt[0].Turn+"/response", resp, 200, nil)
		next := ag.claimOne()
		if next.Step != 3 || next.Role != "next" || next.Parallel {
			t.Fatalf("after the merge: %+v", next)
		}
		want := map[bool]string{false: commit3, true: commit1}[conflict]
		if next.Workspace == nil || next.Workspace.Head != want {
			t.Fatalf("next turn's workspace %+v; want head %s", next.Workspace, want)
		}
		var msgs []struct {
			Step  int `json:"step"`
			Error *struct{ Kind, Message string }
		}
		ag.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
		if len(msgs) != 2 {
			t.Fatalf("%s: messages: %+v", tc.name, msgs)
		}
		for _, m := range msgs {
			if e := m.Error; (m.Step == tc.wantStep) != (e != nil) || e != nil && (e.Kind != "merge" || e.Message != "a.txt") {
				t.Fatalf("%s: step %d's error: %+v", tc.name, m.Step, e)
			}
		}
		var merged string
		for _, ev := range ag.trace(id) {
			if ev.Role == khaladb.MergeRole && (ev.Type == "turn.answered" || ev.Type == "turn.failed") {
				merged = ev.Type + " " + ev.Message
			}
		}
		if wantEv := map[bool]string{false: "turn.answered merged into " + commit3[:12],
			true: fmt.Sprintf("turn.failed step %d: merge: a.txt", tc.wantStep)}[conflict]; merged != wantEv {
			t.Errorf("merge turn in the trace: %q; want %q", merged, wantEv)
		}
	}
}
