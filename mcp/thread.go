package mcp

import (
	"context"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/threadquery"
	"github.com/nerve-agents/nerve/workflow"
)

// ThreadMessagesInput is thread_messages' arguments: the filters of
// `nerve thread messages`.
type ThreadMessagesInput struct {
	Thread string `json:"thread,omitempty" jsonschema:"the thread's ref, [REMOTE/]WORKFLOW#thread-N; default: the thread of the turn you are in"`
	Role   string `json:"role,omitempty" jsonschema:"only the messages of this role"`
	Last   int    `json:"last,omitempty" jsonschema:"only the last N messages (after the other filters); 0: all"`
	Since  string `json:"since,omitempty" jsonschema:"only messages since a time (RFC 3339, e.g. 2026-11-23T10:00:00Z) or a duration ago (e.g. 10m)"`
	Step   int    `json:"step,omitempty" jsonschema:"only the message of this step"`
}

// ThreadMessagesOutput is the thread's messages in step order, each in the
// shape the moderator sees.
type ThreadMessagesOutput struct {
	Thread   string             `json:"thread"`
	Messages []workflow.Message `json:"messages"`
}

// ThreadInput names a thread.
type ThreadInput struct {
	Thread string `json:"thread,omitempty" jsonschema:"the thread's ref, [REMOTE/]WORKFLOW#thread-N; default: the thread of the turn you are in"`
}

// ThreadStatus is where a thread stands.
type ThreadStatus struct {
	Thread    string    `json:"thread"`
	Workflow  string    `json:"workflow"`
	Status    string    `json:"status" jsonschema:"running, completed, failed or cancelled"`
	Step      int       `json:"step" jsonschema:"the number of the last turn assigned"`
	Result    any       `json:"result" jsonschema:"what the thread completed with"`
	Error     string    `json:"error" jsonschema:"why it failed or was cancelled"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// NotifyInput is notify's arguments.
type NotifyInput struct {
	Level   string `json:"level" jsonschema:"info, warning, or blocking: you cannot go on without a person"`
	Message string `json:"message" jsonschema:"what the thread's people should know, in a sentence or two"`
	Thread  string `json:"thread,omitempty" jsonschema:"the thread's ref; default: the thread of the turn you are in"`
}

// NotifyOutput says where the notice went.
type NotifyOutput struct {
	Thread string `json:"thread"`
	Level  string `json:"level"`
}

func (s *server) addThreadTools(srv *sdk.Server) {
	addTool(srv, &sdk.Tool{
		Name:  "thread_messages",
		Title: "Read a thread's messages",
		Description: `Read what the turns of a nerve thread produced, filtered: each message has its step, role, agent, content, meta
(structured output), error and time. Inside a turn the thread defaults to yours; ask for what you need
(e.g. last: 3, or role: "reviewer") rather than everything.`,
		InputSchema: schemaFor[ThreadMessagesInput](func(p map[string]*jsonschema.Schema) {
			p["last"].Minimum = ptr(0.0)
			p["step"].Minimum = ptr(0.0)
		}),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.threadMessages)
	addTool(srv, &sdk.Tool{
		Name:        "thread_status",
		Title:       "A thread's status",
		Description: `Where a nerve thread stands: its status (running, completed, failed, cancelled), its step, and its result or error. Local (WORKFLOW#thread-N) or on a remote (REMOTE/WORKFLOW#thread-N).`,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true},
	}, s.threadStatus)
	if s.opts.ReadOnly {
		return
	}
	addTool(srv, &sdk.Tool{
		Name:  "notify",
		Title: "Tell the thread's people",
		Description: `Put a notice in the thread's trace, where 'nerve workflow logs' shows it and the thread's webhook hears it.
level info: progress worth knowing; warning: something is off but you go on; blocking: you cannot go on without a
person (say what you need). Inside a turn the thread defaults to yours.`,
		InputSchema: schemaFor[NotifyInput](func(p map[string]*jsonschema.Schema) {
			p["level"].Enum = []any{api.NotifyInfo, api.NotifyWarning, api.NotifyBlocking}
			p["message"].MinLength = ptr(1)
			p["message"].MaxLength = ptr(api.MaxNotifyMessage)
		}),
	}, s.notify)
}

func (s *server) threadMessages(ctx context.Context, in ThreadMessagesInput) (ThreadMessagesOutput, error) {
	q := threadquery.Query{Ref: in.Thread, Role: in.Role, Last: in.Last, Since: in.Since, Step: in.Step}
	ref, msgs, err := threadquery.Messages(ctx, q, s.turn(), s.fetch)
	if err != nil {
		return ThreadMessagesOutput{}, err
	}
	if msgs == nil {
		msgs = []workflow.Message{}
	}
	return ThreadMessagesOutput{Thread: ref, Messages: msgs}, nil
}

// threadRef is the ref a tool names, the turn's thread by default.
func (s *server) threadRef(arg string) (workflow.Ref, error) {
	if arg == "" {
		arg = s.turn().Thread
		if arg == "" {
			return workflow.Ref{}, usagef("no thread given and NERVE_THREAD is not set: name one, e.g. code-review#thread-1")
		}
	}
	return threadquery.ThreadRef(arg)
}

func (s *server) threadStatus(ctx context.Context, in ThreadInput) (ThreadStatus, error) {
	ref, err := s.threadRef(in.Thread)
	if err != nil {
		return ThreadStatus{}, err
	}
	var t *workflow.Thread
	if ref.Remote != "" && !s.turn().Own(ref) {
		c, err := s.remote(ref.Remote)
		if err != nil {
			return ThreadStatus{}, err
		}
		if t, err = c.Thread(ctx, ref.Thread); err != nil {
			return ThreadStatus{}, remoteUsage(err)
		}
		if t.Workflow != "" && t.Workflow != ref.Workflow {
			return ThreadStatus{}, usagef("%s is a thread of %s, not of %s", t.ID, t.Workflow, ref.Workflow)
		}
	} else {
		c, err := s.daemonClient(ctx)
		if err != nil {
			return ThreadStatus{}, err
		}
		if t, err = localThread(ctx, c, ref); err != nil {
			return ThreadStatus{}, err
		}
	}
	return ThreadStatus{Thread: ref.String(), Workflow: ref.Workflow, Status: t.Status, Step: t.Step, Result: t.Result,
		Error: t.Error, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, EndedAt: t.EndedAt}, nil
}

// notify goes through the local daemon for local and remote threads
// alike: it holds the claim a remote thread's trace asks for.
func (s *server) notify(ctx context.Context, in NotifyInput) (NotifyOutput, error) {
	if err := api.CheckNotify(in.Level, in.Message); err != nil {
		return NotifyOutput{}, usagef("%v", err)
	}
	ref, err := s.threadRef(in.Thread)
	if err != nil {
		return NotifyOutput{}, err
	}
	req := daemon.NotifyRequest{Thread: ref.String(), Level: in.Level, Message: in.Message}
	if req.Thread == s.turn().Thread {
		req.Step = s.step()
	}
	c, err := s.daemonClient(ctx)
	if err != nil {
		return NotifyOutput{}, err
	}
	if err := c.Notify(ctx, req); err != nil {
		return NotifyOutput{}, err
	}
	return NotifyOutput{Thread: req.Thread, Level: in.Level}, nil
}
