package khala

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/console"
	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// People in the console: the inbox, answers through the API's own path
// (engine.AnswerHuman), and sessions that end when their person is removed.

func (c *consoleSource) Inbox(ctx context.Context, person string) ([]console.InboxItem, error) {
	ws, err := c.s.inbox(ctx, person)
	if err != nil {
		return nil, err
	}
	ns, err := c.s.notices(ctx)
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

// Answer answers as the API's answer endpoint does, with the same checks:
// the turn waits, person is in answered_by, the answer fits the role.
func (c *consoleSource) Answer(ctx context.Context, person string, a console.AnswerForm) error {
	if err := c.mayAnswer(ctx, person); err != nil {
		return err
	}
	ans := workflow.Answer{Content: a.Content}
	if m := strings.TrimSpace(a.Meta); m != "" {
		if err := json.Unmarshal([]byte(m), &ans.Meta); err != nil {
			return &console.FieldError{Field: "meta", Message: "not JSON: " + jsonErr(err)}
		}
	}
	_, _, err := c.s.engine.AnswerHuman(ctx, a.Thread, khaladb.TurnID(a.Thread, a.Step), person, ans)
	var ia *engine.Error
	if errors.As(err, &ia) && ia.Code == engine.CodeInvalidAnswer {
		msg := ia.Msg
		if ia.Field == "meta" && ans.Meta == nil {
			msg = "this role wants meta: JSON matching the schema"
		} else if ia.Field == "content" {
			msg = "the answer is empty: write something"
		}
		return &console.FieldError{Field: cmp.Or(ia.Field, "answer"), Message: msg}
	}
	return err
}

// waitingThreads returns the running threads with a human turn waiting.
func (c *consoleSource) waitingThreads(ctx context.Context) (map[string]bool, error) {
	turns, err := c.s.store.WaitingTurns(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(turns))
	for _, t := range turns {
		out[t.Thread] = true
	}
	return out, nil
}

// recheck ends the session of a person removed since signing in (or
// removed and added again: a new token, a new sign-in).
func (s *Server) recheck(ctx context.Context, person string, since time.Time) error {
	ps, err := s.store.People(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(ps, func(p khaladb.Person) bool { return p.Name == person })
	if i < 0 || ps[i].AddedAt.After(since) {
		return fmt.Errorf("%w: person %s was removed from this server; sign in with a current token", console.ErrSessionEnded, person)
	}
	return nil
}

// consoleChildren are a thread's children as its page lists them.
func consoleChildren(links []khaladb.ChildLink) []console.ThreadSummary {
	out := make([]console.ThreadSummary, 0, len(links))
	for _, l := range links {
		out = append(out, console.ThreadSummary{ID: l.Thread, Workflow: l.Workflow, Status: l.Status, Ref: l.Workflow + "#" + l.Thread})
	}
	return out
}

// threadsWaiting reads the waiting threads of f's page, newest first:
// there are few, each is read on its own.
func (c *consoleSource) threadsWaiting(ctx context.Context, waiting map[string]bool, f console.ThreadFilter) ([]khaladb.Thread, error) {
	ids := make([]uint64, 0, len(waiting))
	for id := range waiting {
		if n, ok := khaladb.ParseThreadID(id); ok {
			ids = append(ids, n)
		}
	}
	slices.SortFunc(ids, func(a, b uint64) int { return cmp.Compare(b, a) })
	var out []khaladb.Thread
	for _, n := range ids {
		if len(out) > f.Page*f.PerPage {
			break
		}
		v, err := c.s.store.Thread(ctx, khaladb.ThreadID(n))
		if errors.Is(err, khaladb.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if v.Thread.Status == workflow.StatusRunning && (f.Workflow == "" || v.Thread.Workflow == f.Workflow) {
			out = append(out, v.Thread)
		}
	}
	return out, nil
}

// mayAnswer refuses a signed-in person whose token lacks the answer
// scope, as the API's answer endpoint does: signing in (console) is not
// answering.
func (c *consoleSource) mayAnswer(ctx context.Context, person string) error {
	ps, err := c.s.store.People(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Name == person {
			return needScope(caller{kind: callerPerson, name: p.Name, scopes: p.Scopes}, ScopeAnswer)
		}
	}
	return fmt.Errorf("%w: no person %q (was the person removed?)", khaladb.ErrUnauthorized, person)
}
