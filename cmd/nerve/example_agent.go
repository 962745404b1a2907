package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/workflow"
)

// newCmdExampleAgent is the deterministic agent of the examples, so they
// run where no agent CLI is installed. It behaves like a real one: it
// reads its prompt on stdin and the thread's history by running `nerve
// thread messages`, and answers with text and a fenced json block.
func newCmdExampleAgent(f *Factory, runF func(*exampleAgentOptions) error) *cobra.Command {
	opts := &exampleAgentOptions{}
	return &cobra.Command{
		Use:    "example-agent",
		Short:  "A deterministic agent for the examples (reads its prompt on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Role = f.Getenv("NERVE_ROLE")
			if runF != nil {
				return runF(opts)
			}
			return exampleAgentRun(f, opts)
		},
	}
}

type exampleAgentOptions struct {
	// Role is the role it plays ($NERVE_ROLE).
	Role string
}

func exampleAgentRun(f *Factory, opts *exampleAgentOptions) error {
	prompt, err := io.ReadAll(io.LimitReader(f.IO.In, 1<<20))
	if err != nil {
		return err
	}
	history, err := exampleHistory(f)
	if err != nil {
		return err
	}
	answer := exampleAnswer(opts.Role, string(prompt), history)
	if dir := exampleWorktree(f); dir != "" && opts.Role == "author" {
		if answer, err = exampleEdit(dir, string(prompt), history); err != nil {
			return err
		}
	}
	fmt.Fprint(f.IO.Out, answer)
	return nil
}

// exampleHistory asks nerve for the thread so far, the way an agent would.
func exampleHistory(f *Factory) ([]workflow.Message, error) {
	if f.Getenv("NERVE_THREAD") == "" {
		return nil, nil
	}
	out, err := exec.Command(f.Executable, "thread", "messages", "--json").Output()
	if err != nil {
		return nil, fmt.Errorf("nerve thread messages: %w", err)
	}
	var msgs []workflow.Message
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m workflow.Message
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func exampleAnswer(role, prompt string, history []workflow.Message) string {
	count := func(r string) int {
		n := 0
		for _, m := range history {
			if m.Role == r {
				n++
			}
		}
		return n
	}
	block := func(v any) string {
		b, _ := json.MarshalIndent(v, "", "  ")
		return "\n```json\n" + string(b) + "\n```\n"
	}
	switch role {
	case "author":
		if count("reviewer") == 0 {
			return "I changed the retry loop to back off exponentially (capped at 30s) and added a test for the cap.\n"
		}
		return fmt.Sprintf("Round %d: I applied the reviewer's findings: the cap is now a named constant and the test covers jitter.\n", count("reviewer")+1)
	case "reviewer":
		if count("reviewer") == 0 {
			return "Two findings before I can approve." + block(map[string]any{
				"approved": false,
				"findings": []string{"name the 30s cap as a constant", "test that jitter stays within bounds"},
			})
		}
		return "Both findings are addressed. Approved." + block(map[string]any{"approved": true, "findings": []string{}})
	case "summarizer":
		var parts []string
		for _, m := range history {
			if m.Role != "summarizer" {
				parts = append(parts, m.Role)
			}
		}
		return fmt.Sprintf("Summary of %d reviews (%s): no blocking issues.", len(parts), strings.Join(parts, ", ")) +
			block(map[string]any{"verdict": "ship", "reviews": len(parts)})
	default:
		return fmt.Sprintf("Reviewed from the %s angle: nothing blocking.", role) +
			block(map[string]any{"ok": true, "notes": []string{role + " looks fine"}})
	}
}
