package main

import (
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// A worktree's key reads back as the thread it was made for, whatever
// "-" the remotes' names hold; an older daemon's REMOTE--WORKFLOW--THREAD
// is not read as anyone's (prune removes it), and neither is a local id.
func TestWorkspaceKeyRef(t *testing.T) {
	for _, tc := range []struct {
		key    string
		want   workflow.Ref
		ok     bool
		legacy bool
	}{
		{"origin/code-review#thread-7", workflow.Ref{Remote: "origin", Workflow: "code-review", Thread: "thread-7"}, true, false},
		{"o/x--w#thread-2", workflow.Ref{Remote: "o", Workflow: "x--w", Thread: "thread-2"}, true, false},
		{"o--x/w#thread-2", workflow.Ref{Remote: "o--x", Workflow: "w", Thread: "thread-2"}, true, false},
		{"origin--code-review--thread-7", workflow.Ref{}, false, true},
		{"o--x--w--thread-2", workflow.Ref{}, false, true},
		{"thread-3", workflow.Ref{}, false, false},
		{"origin--thread-3", workflow.Ref{}, false, false},
	} {
		got, ok := workspaceKeyRef(tc.key)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("workspaceKeyRef(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
		}
		if l := legacyCloudKey().MatchString(tc.key); l != tc.legacy {
			t.Errorf("legacyCloudKey(%q) = %v; want %v", tc.key, l, tc.legacy)
		}
	}
}
