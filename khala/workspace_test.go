package khala

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb/khalapg"
	"github.com/nerve-agents/nerve/workflow"
)

// codedWF is a cloud workflow with a workspace: the author must change
// something each turn; after two turns the thread ends with its head.
const codedWF = `workflow: coded
binding: cloud
workspace: {repo: 'https://git.example.com/team/app.git'}
moderator: |
  $count(messages) = 0 ? {"role": "author", "instruction": "edit"} :
  last.changes.files = 0 ? {"fail": "the author changed nothing"} :
  $count(messages) < 2 ? {"role": "author", "instruction": "again"} :
  {"done": true, "result": {"head": workspace.head, "branch": workspace.branch, "commit": last.commit, "files": last.changes.files}}
roles:
  author: {prompt: You edit the code.}
`

var (
	commit0 = strings.Repeat("0a", 20)
	commit1 = strings.Repeat("1b", 20)
	commit2 = strings.Repeat("2c", 20)
)

func TestWorkspaceThreads(t *testing.T) { eachBackend(t, testWorkspaceThreads) }

func testWorkspaceThreads(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop-1")
	a.putWorkflow(codedWF)
	a.putWorkflow(pairWF)
	path := "/v1/workflows/coded/threads"
	var wf workflowJSON
	a.must("GET", "/v1/workflows/coded", nil, 200, &wf)
	if wf.Workspace == nil || wf.Workspace.Repo != "https://git.example.com/team/app.git" || wf.Workspace.Base != "" {
		t.Fatalf("the workflow shows its workspace: %+v", wf.Workspace)
	}
	if data := a.must("GET", "/v1/workflows/pair", nil, 200, nil); !strings.Contains(string(data), `"workspace":null`) {
		t.Fatalf("a workflow without a workspace shows null: %s", data)
	}

	bad := []struct {
		name string
		body map[string]any
		want string
	}{
		{"no workspace", map[string]any{"input": map[string]any{}}, "declares a workspace: give workspace.base"},
		{"not an object", map[string]any{"workspace": "main"}, "workspace: "},
		{"no base", map[string]any{"workspace": map[string]any{}}, "workspace.base is required"},
		{"base a branch", map[string]any{"workspace": map[string]any{"base": "main"}}, "want a full commit id"},
		{"base short", map[string]any{"workspace": map[string]any{"base": commit0[:12]}}, "want a full commit id"},
		{"unknown key", map[string]any{"workspace": map[string]any{"base": commit0, "head": commit1}}, `unknown field "head"`},
		{"branch ..", map[string]any{"workspace": map[string]any{"base": commit0, "branch": "a..b"}}, `workspace.branch "a..b"`},
		{"branch space", map[string]any{"workspace": map[string]any{"base": commit0, "branch": "my branch"}}, "spaces"},
		{"branch option", map[string]any{"workspace": map[string]any{"base": commit0, "branch": "-f"}}, "must not start with '-'"},
		{"branch lock", map[string]any{"workspace": map[string]any{"base": commit0, "branch": "x.lock"}}, ".lock"},
		{"branch main", map[string]any{"workspace": map[string]any{"base": commit0, "branch": "main"}}, `workspace.branch "main": a cloud thread's branch is under nerve/`},
		{"branch outside nerve/", map[string]any{"workspace": map[string]any{"base": commit0, "branch": "release/1.2"}}, "under nerve/"},
		{"repo relative", map[string]any{"workspace": map[string]any{"base": commit0, "repo": "."}}, "workspace.repo"},
		{"repo password", map[string]any{"workspace": map[string]any{"base": commit0, "repo": "https://u:p@h/x.git"}}, "password"},
	}
	for _, tc := range bad {
		status, data := a.do("POST", path, tc.body)
		if status != 400 || errCode(data) != codeBadRequest || !strings.Contains(errMessage(data), tc.want) {
			t.Errorf("%s: got %d %s, want 400 containing %q", tc.name, status, data, tc.want)
		}
	}
	// A branch the client says the remote has is refused by name.
	taken := map[string]any{"workspace": map[string]any{"base": commit0, "branch": "nerve/coded/mine", "taken": []string{"nerve/coded/mine"}}}
	if status, data := a.do("POST", path, taken); status != 409 || errCode(data) != codeBranchTaken || !strings.Contains(errMessage(data), `"nerve/coded/mine" exists on the shared remote`) {
		t.Errorf("a taken branch: got %d %s, want 409 %s naming it", status, data, codeBranchTaken)
	}
	claim := func() api.Turn {
		t.Helper()
		got := a.claim(map[string]any{"max": 1, "wait": "5s", "workflows": []string{"coded"}})
		if len(got) != 1 {
			t.Fatalf("want one turn of coded, got %d", len(got))
		}
		return got[0]
	}
	// A pair thread may be given a workspace; without one it shows null.
	plain := a.start("pair", nil, "")
	if data := a.must("GET", "/v1/threads/"+plain, nil, 200, nil); !strings.Contains(string(data), `"workspace":null`) {
		t.Fatalf("a thread without a workspace shows workspace: null: %s", data)
	}

	hook := newHookReceiver(t, 0)
	var started startResponse
	a.must("POST", path, map[string]any{"input": map[string]any{}, "webhook": hook.URL,
		"workspace": map[string]any{"base": strings.ToUpper(commit0)}}, 201, &started)
	id := started.Thread
	want := workflow.Workspace{Repo: "https://git.example.com/team/app.git", Base: commit0, Branch: "nerve/coded/" + id, Head: commit0}
	if got := a.thread(id).Workspace; got == nil || *got != want {
		t.Fatalf("new thread's workspace %+v, want %+v", got, want)
	}

	// An answer with a bad commit is refused before anything is recorded.
	tk := claim()
	for body, want := range map[string]string{
		`{"claim": "` + tk.Claim + `", "content": "x", "commit": "abc"}`:                                           "commit \"abc\"",
		`{"claim": "` + tk.Claim + `", "content": "x", "commit": "` + commit1 + `", "changes": {"files": -1}}`:     "must not be negative",
		`{"claim": "` + tk.Claim + `", "content": "x", "commit": "` + commit1 + `", "changes": {"files": "many"}}`: "malformed JSON",
	} {
		if status, data := a.do("POST", "/v1/turns/"+tk.Turn+"/response", body); status != 400 || !strings.Contains(errMessage(data), want) {
			t.Errorf("response %s: got %d %s, want 400 containing %q", body, status, data, want)
		}
	}
	respond := func(tk api.Turn, commit string, files int) {
		t.Helper()
		a.must("POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "edited",
			"commit": commit, "changes": map[string]any{"files": files, "insertions": 3, "deletions": 1}}, 200, nil)
	}
	respond(tk, commit1, 1)
	th := a.thread(id)
	if th.Workspace == nil || th.Workspace.Head != commit1 || th.Workspace.Base != commit0 {
		t.Fatalf("after the first answer the head is its commit: %+v", th.Workspace)
	}
	var msgs []workflow.Message
	a.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 1 || msgs[0].Commit != commit1 || msgs[0].Changes == nil || *msgs[0].Changes != (workflow.Changes{Files: 1, Insertions: 3, Deletions: 1}) {
		t.Fatalf("the message records commit and changes: %+v", msgs)
	}

	respond(claim(), commit2, 2)
	th = a.thread(id)
	wantResult := map[string]any{"head": commit2, "branch": "nerve/coded/" + id, "commit": commit2, "files": float64(2)}
	if th.Status != workflow.StatusCompleted || th.Workspace.Head != commit2 || !reflect.DeepEqual(th.Result, wantResult) {
		t.Fatalf("thread %s (%s), head %s, result %v; want the moderator to see the moved head %v", th.Status, th.Error, th.Workspace.Head, th.Result, wantResult)
	}

	// The end's webhook says where the branch is.
	if p := hook.next(t); p.Event != workflow.EventThreadEnded || p.Workspace == nil || p.Workspace.Head != commit2 || p.Workspace.Branch != "nerve/coded/"+id {
		t.Fatalf("end webhook %+v, want the thread's branch at %s", p, commit2)
	}

	// A turn that changed nothing: the moderator refuses it.
	var other startResponse
	a.must("POST", path, map[string]any{"workspace": map[string]any{"base": commit0, "branch": "nerve/review/x", "repo": "git@git.example.com:team/app.git"}}, 201, &other)
	if ws := a.thread(other.Thread).Workspace; ws.Branch != "nerve/review/x" || ws.Repo != "git@git.example.com:team/app.git" {
		t.Fatalf("given branch and repo: %+v", ws)
	}
	tk = claim()
	a.must("POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "nothing to do",
		"changes": map[string]any{"files": 0, "insertions": 0, "deletions": 0}}, 200, nil)
	if th := a.thread(other.Thread); th.Status != workflow.StatusFailed || th.Error != "the author changed nothing" || th.Workspace.Head != commit0 {
		t.Fatalf("a turn that changed nothing: %s (%s), head %s", th.Status, th.Error, th.Workspace.Head)
	}

	// The answers above took PostgreSQL's fast path (a change made from
	// the claim's view): commit, changes and head go through it too.
	if pg, ok := ts.store.(*khalapg.Store); ok && pg.FastPathStats().Fast == 0 {
		t.Error("no answer was written through the fast path")
	}
	// What was stored reads back the same from a fresh store.
	ts.stop()
	again := &client{ts: newServerOn(t, ts.reopen(t)), token: a.token, name: a.name}
	if ws := again.thread(id).Workspace; ws == nil || ws.Head != commit2 || ws.Branch != "nerve/coded/"+id {
		t.Fatalf("after a restart: %+v", ws)
	}
	again.must("GET", "/v1/threads/"+id+"/messages", nil, 200, &msgs)
	if len(msgs) != 2 || msgs[1].Commit != commit2 || msgs[1].Changes.Files != 2 {
		t.Fatalf("after a restart the messages keep commit and changes: %+v", msgs)
	}
}

// errMessage is an error body's message.
func errMessage(data []byte) string {
	var eb errorBody
	json.Unmarshal(data, &eb)
	return eb.Error.Message
}
