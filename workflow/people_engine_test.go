package workflow_test

import (
	"context"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// A child's totals count in its parent's, and a child that could not
// start fails the parent with the refusal.
func TestEngineChildTurns(t *testing.T) {
	child := func(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
		if !turn.IsChild() {
			return workflow.Message{Content: "agent", Usage: &usage.Usage{InputTokens: usage.Int(5), OutputTokens: usage.Int(1)}}
		}
		return workflow.Message{Content: "child result", Child: "kid#thread-9",
			ChildUsage: &usage.Totals{Messages: 2, InputTokens: 100, OutputTokens: 20, CostUSD: usage.Float(0.5)}}
	}
	th, msgs, _ := run(t, `last = null ? [{"workflow": "kid"}, {"role": "a"}] : {"done": true}`, child)
	if th.Status != workflow.StatusCompleted || len(msgs) != 2 || msgs[0].Child != "kid#thread-9" {
		t.Fatalf("thread %s, messages %+v", th.Status, msgs)
	}
	if u := th.Usage; u.InputTokens != 105 || u.OutputTokens != 21 || u.CostUSD == nil || *u.CostUSD != 0.5 || u.Messages != 3 {
		t.Fatalf("the parent's totals do not hold the child's: %+v", u)
	}
	refused := func(_ context.Context, _ *workflow.Thread, _ *workflow.Definition, turn workflow.Turn, _ []workflow.Message) workflow.Message {
		return workflow.Message{Error: &workflow.MessageError{Kind: workflow.ErrorKindSpawn, Message: "child thread refused: too deep"}}
	}
	th, _, _ = run(t, `last = null ? {"workflow": "kid"} : {"done": true}`, refused)
	if th.Status != workflow.StatusFailed || th.Error != "child thread refused: too deep" {
		t.Fatalf("a refused child: %s %q", th.Status, th.Error)
	}
}
