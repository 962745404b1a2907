package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Prompt builds what an adapter is given for a turn: the role's prompt,
// the turn's instruction, the meta schema when the role has one, then one
// line naming the thread and how to read it. History is not dumped in; the
// agent asks for what it needs, unless the role sets context.last.
func Prompt(d *Definition, ref string, t Turn, history []Message) string {
	role := d.Roles[t.Role]
	var b strings.Builder
	b.WriteString(strings.TrimSpace(role.Prompt))
	if t.Instruction != "" {
		b.WriteString("\n\n")
		b.WriteString(strings.TrimSpace(t.Instruction))
	}
	if role.Meta != nil {
		schema, _ := json.MarshalIndent(role.Meta, "", "  ")
		b.WriteString("\n\nEnd your answer with a fenced ```json block holding one object that matches this JSON Schema:\n```json\n")
		b.Write(schema)
		b.WriteString("\n```")
	}
	if role.Context != nil && role.Context.Last > 0 && len(history) > 0 {
		n := min(role.Context.Last, len(history))
		b.WriteString("\n\nThe last messages of this thread:\n")
		for _, m := range history[len(history)-n:] {
			fmt.Fprintf(&b, "\n--- step %d, %s ---\n%s\n", m.Step, m.Role, strings.TrimSpace(m.Content))
		}
	}
	fmt.Fprintf(&b, "\n\nYou are %s at step %d of thread %s; run `nerve thread messages --last 3` to read earlier messages.\n", t.Role, t.Step, ref)
	return b.String()
}
