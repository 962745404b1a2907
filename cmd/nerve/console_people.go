package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nerve-agents/nerve/console"
	"github.com/nerve-agents/nerve/daemon"
	"github.com/nerve-agents/nerve/workflow"
)

// People in the local console: the person is the local user, signed in by
// the one-time link; answers go through the daemon's answer endpoint and
// its checks (the console process is no running turn's, so it may answer).

// consoleChildrenRead bounds how many children's statuses a thread's page
// reads; past it they are listed without one.
const consoleChildrenRead = 100

func (d *consoleDaemon) Inbox(ctx context.Context, _ string) ([]console.InboxItem, error) {
	ws, err := d.client.Inbox(ctx)
	if err != nil {
		return nil, err
	}
	ns, err := d.client.Notices(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.InboxItem, 0, len(ws)+len(ns))
	for _, w := range ws {
		out = append(out, console.NewInboxItem(w))
	}
	for _, n := range ns {
		out = append(out, console.InboxItem{Thread: n.Thread, Workflow: n.Workflow, Role: n.Role, Step: n.Step,
			Notice: n.Message, Agent: n.Agent, Since: n.At})
	}
	return out, nil
}

func (d *consoleDaemon) Answer(ctx context.Context, _ string, a console.AnswerForm) error {
	req := daemon.AnswerRequest{Step: a.Step, Content: a.Content}
	if m := strings.TrimSpace(a.Meta); m != "" {
		if err := json.Unmarshal([]byte(m), &req.Meta); err != nil {
			return &console.FieldError{Field: "meta", Message: "not JSON: " + err.Error()}
		}
	}
	_, err := d.client.Answer(ctx, a.Thread, req)
	var ae *daemon.APIError
	if errors.As(err, &ae) && ae.Field != "" {
		msg := ae.Message
		switch {
		case ae.Field == "meta" && req.Meta == nil:
			msg = "this role wants meta: JSON matching the schema"
		case ae.Field == "content":
			msg = "the answer is empty: write something"
		}
		return &console.FieldError{Field: cmp.Or(ae.Field, "answer"), Message: msg}
	}
	return err
}

// waitingThreads are the threads with a human turn waiting.
func (d *consoleDaemon) waitingThreads(ctx context.Context) (map[string]bool, error) {
	ws, err := d.client.Inbox(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ws))
	for _, w := range ws {
		out[w.Thread] = true
	}
	return out, nil
}

// children lists a thread's children by ref, with the statuses of the
// local ones (a child on a remote is listed by its ref alone).
func (d *consoleDaemon) children(ctx context.Context, c *workflow.Children) []console.ThreadSummary {
	out := []console.ThreadSummary{}
	if c == nil {
		return out
	}
	for i, ref := range c.Refs {
		s := console.ThreadSummary{Ref: ref}
		if r, err := workflow.ParseRef(ref); err == nil && r.Remote == "" {
			s.ID, s.Workflow = r.Thread, r.Workflow
			if i < consoleChildrenRead {
				if t, err := d.client.Thread(ctx, r.Thread); err == nil {
					s.Status = t.Status
				}
			}
		}
		out = append(out, s)
	}
	return out
}
