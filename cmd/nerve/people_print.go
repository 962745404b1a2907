package main

import (
	"fmt"
	"strings"

	"github.com/nerve-agents/nerve/workflow"
)

// answerCommand is the exact command a person runs to answer a human
// turn of ref: with --meta when the role wants structured output, with
// --step when the thread waits on several people at once.
func answerCommand(ref string, w *workflow.Waiting, several bool) string {
	cmd := fmt.Sprintf("nerve thread answer %s \"TEXT\"", ref)
	if several && w != nil {
		cmd += fmt.Sprintf(" --step %d", w.Step)
	}
	if w != nil && w.Meta != nil {
		cmd += " --meta '" + metaExample(w.Meta) + "'"
	} else if w == nil {
		cmd += " [--meta JSON]"
	}
	return cmd
}

// metaExample sketches an object of a meta schema's required properties,
// so the command shown is one a person can edit: {"approved": true}.
func metaExample(schema any) string {
	s, _ := schema.(map[string]any)
	req, _ := s["required"].([]any)
	props, _ := s["properties"].(map[string]any)
	if len(req) == 0 {
		return "{...}"
	}
	parts := make([]string, 0, len(req))
	for _, r := range req {
		name, _ := r.(string)
		p, _ := props[name].(map[string]any)
		val := "..."
		switch p["type"] {
		case "boolean":
			val = "true"
		case "string":
			val = `"..."`
		case "number", "integer":
			val = "0"
		case "array":
			val = "[]"
		}
		parts = append(parts, fmt.Sprintf("%q: %s", name, val))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// printPeople is the part of a thread's log header about people and
// children: who each waiting turn waits for and how to answer it, and the
// children by status with their refs.
func printPeople(f *Factory, ref workflow.Ref, t *workflow.Thread) {
	tr := ref
	tr.Thread = t.ID
	for i := range t.Waiting {
		w := &t.Waiting[i]
		fmt.Fprintf(f.IO.Out, "step %d  %s  waits for %s: %s\n", w.Step, w.Role, workflow.WhoAnswers(w.AnsweredBy),
			answerCommand(tr.String(), w, len(t.Waiting) > 1))
	}
	if c := t.Children; c != nil && len(c.Refs) > 0 {
		fmt.Fprintf(f.IO.Out, "children: %s (%s)\n", c, strings.Join(c.Refs, ", "))
	}
}

// parens is " (s)", or "" for an empty s: a person's answer and a child's
// result have no adapter to name.
func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
