package khala

import (
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// bossWF gives its lead turns until its budget stops it.
const bossWF = `workflow: boss
binding: cloud
moderator: '{"role": "lead"}'
roles:
  lead: {prompt: You delegate.}
limits:
  max_tokens: 100
`

// What a child an agent started from inside a turn spends counts in its
// parent's totals and budget once it ends, though no step waits for it.
func TestAgentChildSpendCountsInParent(t *testing.T) { eachBackend(t, testAgentChildSpend) }

func testAgentChildSpend(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	a.putWorkflow(bossWF)
	a.putWorkflow(reviewWF)
	id := a.start("boss", nil, "")
	lead := a.claimOne()
	var out startResponse
	for _, turn := range []any{-1, 2, "one"} {
		if status, data := a.do("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
			"parent": map[string]any{"thread": id, "turn": turn}}); status != 400 {
			t.Errorf("parent.turn %v of a thread at step 1: %d %s", turn, status, data)
		}
	}
	a.must("POST", "/v1/workflows/review/threads", map[string]any{"input": map[string]any{"item": "x"},
		"parent": map[string]any{"thread": id, "turn": 1}}, 201, &out)
	if evs := a.trace(id); evs[len(evs)-1].Type != workflow.EventChildStarted || evs[len(evs)-1].Step != 1 {
		t.Fatalf("the parent's trace: %+v", evs[len(evs)-1])
	}
	review := a.claimOne()
	if review.Thread != out.Thread {
		t.Fatalf("claimed %s, want the child's turn", review.Thread)
	}
	a.answerWith(review, "codex", costing("gpt", 150, 0.15))
	if c := a.thread(out.Thread); c.Status != workflow.StatusCompleted || c.Usage.Tokens() != 150 {
		t.Fatalf("child: %s, usage %+v", c.Status, c.Usage)
	}
	th := a.thread(id)
	if th.Usage.Tokens() != 150 || th.Usage.Messages != 1 || th.Status != workflow.StatusRunning {
		t.Fatalf("parent after its agent's child: %s %q, usage %+v", th.Status, th.Error, th.Usage)
	}
	// Over its budget now: the lead's claimed turn may answer, nothing
	// more starts.
	a.answerWith(lead, "codex", costing("gpt", 10, 0.01))
	th = a.thread(id)
	if th.Status != workflow.StatusFailed || th.Error != "budget: 160 tokens of 100" || th.Usage.Messages != 2 {
		t.Fatalf("parent: %s %q, usage %+v", th.Status, th.Error, th.Usage)
	}
	if got := a.claim(map[string]any{"max": 3}); len(got) != 0 {
		t.Fatalf("a turn was queued past the budget: %+v", got)
	}
	// Delivered twice (the sweeper's check racing the end): counted once.
	cv, err := ts.srv.store.Thread(t.Context(), out.Thread)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.engine.DeliverChild(t.Context(), cv.Thread)
	if th := a.thread(id); th.Usage.Tokens() != 160 {
		t.Fatalf("counted twice: %+v", th.Usage)
	}
}
