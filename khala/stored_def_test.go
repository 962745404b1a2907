package khala

import (
	"github.com/nerve-agents/nerve/khala/engine"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// oldWF was published before 0 as a limit and an input default of another
// type were refused.
const oldWF = `workflow: old
binding: cloud
moderator: |
  $count(messages) = 0 ? {"role": "worker", "instruction": "work"} : {"done": true, "result": last.content}
inputs:
  n: {type: integer, default: abc}
roles:
  worker: {prompt: You work.}
limits: {max_steps: 0, claim: 0s, max_attempts: 0}
`

// A definition stored before today's checks still runs: a thread starts,
// its turn is claimed with the default lease (claim: 0s was "the
// default") and answered. Publishing it again is refused.
func TestStoredDefinitionFromBeforeTheChecks(t *testing.T) {
	ts := newTestServer(t)
	a := ts.agent("a")
	src := []byte(oldWF)
	if _, err := ts.store.PutWorkflow(t.Context(), khaladb.WorkflowRecord{Name: "old", SourceHash: engine.SourceHash(src),
		UpdatedAt: time.Now(), UpdatedBy: "a"}, src); err != nil {
		t.Fatal(err)
	}
	id := a.start("old", nil, "")
	tk := a.claimOne()
	if lease := time.Until(tk.LeaseExpires); lease < 9*time.Minute {
		t.Fatalf("lease %s: want the default, 10m", lease)
	}
	if s, d := a.respond(tk, "done", nil); s != 200 {
		t.Fatalf("respond: %d %s", s, d)
	}
	if th := a.thread(id); th.Status != workflow.StatusCompleted || th.Result != "done" {
		t.Fatalf("thread %s, result %v, error %q: want completed with done", th.Status, th.Result, th.Error)
	}
	if s, d := a.do("PUT", "/v1/workflows/old", map[string]string{"source": oldWF}); s != 400 || errCode(d) != codeInvalidWF {
		t.Fatalf("publishing it again: %d %s, want 400 %s", s, d, codeInvalidWF)
	}
}
