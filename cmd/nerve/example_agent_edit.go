package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/workflow"
)

// The example agent as an author that really edits: when its turn runs in
// a thread's worktree (a workflow that declares a workspace, such as
// examples/code-change.yaml), it appends the round's change to CHANGES.md
// there, and the daemon commits it on its behalf. Anywhere else (the
// user's own checkout: `make demo` runs code-review.yaml without a
// workspace) it edits nothing.

// exampleNoEdit in its instruction makes the author answer without
// editing, so the example can show a moderator refusing a turn that
// changed nothing.
const exampleNoEdit = "[no edit]"

// exampleWorktree is NERVE_WORKDIR when it is one of this NERVE_HOME's
// thread worktrees, else "".
func exampleWorktree(f *Factory) string {
	dir := f.Getenv("NERVE_WORKDIR")
	if dir == "" {
		return ""
	}
	root := filepath.Join(config.Home(f.Getenv), "worktrees")
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return ""
	}
	return dir
}

// exampleEdit appends this round's entry to CHANGES.md in dir and says
// what it did; the same history gives the same edit.
func exampleEdit(dir, prompt string, history []workflow.Message) (string, error) {
	round := 1
	for _, m := range history {
		if m.Role == "author" {
			round++
		}
	}
	if strings.Contains(prompt, exampleNoEdit) {
		return fmt.Sprintf("Round %d: I read the code and changed nothing.\n", round), nil
	}
	entry := "- Retry failed uploads with exponential backoff, capped at 30s.\n"
	for _, m := range history {
		if m.Role == "reviewer" {
			entry = fmt.Sprintf("- Round %d: the 30s cap is a named constant; a test checks that jitter stays within bounds.\n", round)
		}
	}
	path := filepath.Join(dir, "CHANGES.md")
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", fmt.Errorf("edit %s: %w", path, err)
	}
	if _, err := fh.WriteString(entry); err != nil {
		fh.Close()
		return "", fmt.Errorf("edit %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return "", fmt.Errorf("edit %s: %w", path, err)
	}
	return fmt.Sprintf("Round %d: I added to CHANGES.md: %s", round, entry), nil
}
