package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// The example author edits only in one of NERVE_HOME's thread worktrees,
// never in the user's checkout, and the same history gives the same edit.
func TestExampleAgentEditsOnlyInAWorktree(t *testing.T) {
	home := t.TempDir()
	tree := filepath.Join(home, "worktrees", "thread-1")
	user := t.TempDir()
	for _, d := range []string{tree, user} {
		os.MkdirAll(d, 0o700)
		os.WriteFile(filepath.Join(d, ".git"), []byte("gitdir: x\n"), 0o600)
	}
	f := newFactory(nil)
	env := map[string]string{"NERVE_HOME": home}
	f.Getenv = func(k string) string { return env[k] }
	for dir, want := range map[string]string{tree: tree, user: "", filepath.Join(home, "worktrees"): ""} {
		env["NERVE_WORKDIR"] = dir
		if got := exampleWorktree(f); got != want {
			t.Errorf("exampleWorktree(%s) = %q, want %q", dir, got, want)
		}
	}

	history := []workflow.Message{{Role: "author"}, {Role: "reviewer"}}
	answer, err := exampleEdit(tree, "Make this change", nil)
	if err != nil || !strings.Contains(answer, "CHANGES.md") {
		t.Fatalf("first edit: %q %v", answer, err)
	}
	if _, err := exampleEdit(tree, "Address the findings", history); err != nil {
		t.Fatal(err)
	}
	answer, _ = exampleEdit(tree, "[no edit] Make this change", nil)
	if !strings.Contains(answer, "changed nothing") {
		t.Fatalf("no-edit answer: %q", answer)
	}
	got, _ := os.ReadFile(filepath.Join(tree, "CHANGES.md"))
	want := "- Retry failed uploads with exponential backoff, capped at 30s.\n" +
		"- Round 2: the 30s cap is a named constant; a test checks that jitter stays within bounds.\n"
	if string(got) != want {
		t.Fatalf("CHANGES.md:\n%s\nwant:\n%s", got, want)
	}
}
