package main

import (
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// The --json shapes of messages and threads. A stable shape has every
// key, null when empty (DESIGN.md, The CLI), whatever the Go types they
// are stored as leave out.

// messageJSON is one line of `workflow logs --json` and `thread messages
// --json`: the message as the moderator sees it.
type messageJSON struct {
	Step        int                    `json:"step"`
	Role        string                 `json:"role"`
	Agent       string                 `json:"agent"`
	Content     string                 `json:"content"`
	Meta        any                    `json:"meta"`
	Error       *workflow.MessageError `json:"error"`
	At          time.Time              `json:"at"`
	Instruction *string                `json:"instruction"`
	Adapter     *string                `json:"adapter"`
	Usage       *usage.Usage           `json:"usage"`
	Commit      *string                `json:"commit"`
	Changes     *workflow.Changes      `json:"changes"`
	Child       *string                `json:"child"`
}

func newMessageJSON(m workflow.Message) messageJSON {
	return messageJSON{
		Step: m.Step, Role: m.Role, Agent: m.Agent, Content: m.Content, Meta: m.Meta, Error: m.Error,
		At: m.At, Instruction: nullable(m.Instruction), Adapter: nullable(m.Adapter), Usage: m.Usage,
		Commit: nullable(m.Commit), Changes: m.Changes, Child: nullable(m.Child),
	}
}

// threadJSON is one line of `workflow logs REF --json` (a workflow's
// threads).
type threadJSON struct {
	Ref       string         `json:"ref"`
	ID        string         `json:"id"`
	Workflow  string         `json:"workflow"`
	Status    string         `json:"status"`
	Step      int            `json:"step"`
	Input     map[string]any `json:"input"`
	Result    any            `json:"result"`
	Error     *string        `json:"error"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	EndedAt   *time.Time     `json:"ended_at"`
	// Workspace is {repo, base, branch, head}, null without one.
	Workspace *workflow.Workspace `json:"workspace"`
	// Parent is the ref of the thread it is a child of; Depth 0 for a
	// top-level thread.
	Parent *string `json:"parent"`
	Depth  int     `json:"depth"`
	// Usage is the thread's totals.
	Usage usage.Totals `json:"usage"`
}

func newThreadJSON(remote string, t *workflow.Thread) threadJSON {
	j := threadJSON{
		Ref: workflow.Ref{Remote: remote, Workflow: t.Workflow, Thread: t.ID}.String(),
		ID:  t.ID, Workflow: t.Workflow, Status: t.Status, Step: t.Step, Input: t.Input,
		Result: t.Result, Error: nullable(t.Error), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Workspace: t.Workspace, Depth: t.Depth, Usage: t.Usage,
	}
	if t.Parent != nil {
		j.Parent = &t.Parent.Ref
	}
	if !t.EndedAt.IsZero() {
		j.EndedAt = &t.EndedAt
	}
	return j
}

// waitingJSON is one turn of `nerve inbox --json`, the same for a local
// and a remote thread's.
type waitingJSON struct {
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	Ref      string `json:"ref"`
	// Turn is Khala's turn id, null for a local thread's turn.
	Turn *string `json:"turn"`
	Step int     `json:"step"`
	Role string  `json:"role"`
	// Prompt is the turn's prompt as an agent would be given it: the
	// role's, the instruction, the meta schema, the thread's line.
	Prompt      *string `json:"prompt"`
	Instruction *string `json:"instruction"`
	// AnsweredBy names who may answer; null: any person.
	AnsweredBy []string  `json:"answered_by"`
	Meta       any       `json:"meta_schema"`
	Since      time.Time `json:"since"`
}

// noticeJSON is one blocking notice of `nerve inbox --json`: an agent's
// notify at level blocking, listed until its thread's next turn starts.
type noticeJSON struct {
	Thread   string    `json:"thread"`
	Workflow string    `json:"workflow"`
	Ref      string    `json:"ref"`
	Step     int       `json:"step"`
	Role     string    `json:"role"`
	Agent    string    `json:"agent"`
	Level    string    `json:"level"`
	Message  string    `json:"message"`
	Since    time.Time `json:"since"`
}

func newNoticeJSON(n api.Notice) noticeJSON {
	return noticeJSON{Thread: n.Thread, Workflow: n.Workflow, Ref: n.Ref, Step: n.Step, Role: n.Role, Agent: n.Agent,
		Level: n.Level, Message: n.Message, Since: n.At}
}

func newWaitingJSON(w workflow.Waiting) waitingJSON {
	j := waitingJSON{
		Thread: w.Thread, Workflow: w.Workflow, Ref: w.Ref, Turn: nullable(w.Turn), Step: w.Step, Role: w.Role,
		Prompt: nullable(w.Prompt), Instruction: nullable(w.Instruction), Meta: w.Meta, Since: w.Since,
	}
	if len(w.AnsweredBy) > 0 {
		j.AnsweredBy = w.AnsweredBy
	}
	return j
}
