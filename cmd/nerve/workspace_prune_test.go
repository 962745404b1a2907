package main

import (
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

func TestWorkspaceKeyRef(t *testing.T) {
	remotes := []string{"origin", "eu-1"}
	for _, tc := range []struct {
		key  string
		want workflow.Ref
		ok   bool
	}{
		{"origin/code-review#thread-7", workflow.Ref{Remote: "origin", Workflow: "code-review", Thread: "thread-7"}, true},
		{"origin--code-review--thread-7", workflow.Ref{Remote: "origin", Workflow: "code-review", Thread: "thread-7"}, true},
		{"eu-1--a--b--thread-2", workflow.Ref{Remote: "eu-1", Workflow: "a--b", Thread: "thread-2"}, true},
		{"gone--w--thread-1", workflow.Ref{}, false},
		{"thread-3", workflow.Ref{}, false},
		{"origin--thread-3", workflow.Ref{}, false},
	} {
		got, ok := workspaceKeyRef(tc.key, remotes)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("workspaceKeyRef(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}
