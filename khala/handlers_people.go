package khala

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// codeForbidden refuses a caller what it may not do.
const codeForbidden = engine.CodeForbidden

func forbidden(format string, a ...any) error {
	return &apiError{http.StatusForbidden, codeForbidden, fmt.Sprintf(format, a...)}
}

// authPerson checks a person's token (h) for a route of kind: people
// answer and read; an agent's token never answers, a person's never acts
// as an agent. People are read from the store on every request.
func (s *Server) authPerson(ctx context.Context, h khaladb.Hash, kind int) (khaladb.Agent, error) {
	p, err := s.store.PersonByToken(ctx, h)
	switch {
	case err == nil && (kind == authPerson || kind == authRead || kind == authCancel):
		return khaladb.Agent{Name: p.Name, Scopes: p.Scopes}, nil
	case err == nil:
		return khaladb.Agent{}, forbidden("this is %s's person token: a person answers human turns and reads threads; claiming, answering turns as an agent, publishing and starting take an agent token", p.Name)
	case !errors.Is(err, khaladb.ErrUnauthorized):
		return khaladb.Agent{}, err
	case kind != authPerson:
		return khaladb.Agent{}, fmt.Errorf("%w: unknown person token (was the person removed?)", khaladb.ErrUnauthorized)
	}
	if _, aerr := s.store.AgentByToken(ctx, h); aerr == nil {
		return khaladb.Agent{}, forbidden("an agent's token cannot answer for a person: answer with a person's token (nerve khala user add NAME)")
	}
	return khaladb.Agent{}, fmt.Errorf("%w: unknown person token", khaladb.ErrUnauthorized)
}

// PersonByToken returns the name of the person whose token tok is: the
// web console's sign-in. Errors: ErrUnauthorized for any other token.
func (s *Server) PersonByToken(ctx context.Context, tok string) (string, error) {
	p, err := s.store.PersonByToken(ctx, hashToken(strings.TrimSpace(tok)))
	if err == nil {
		err = needScope(caller{kind: callerPerson, name: p.Name, scopes: p.Scopes}, ScopeConsole)
	}
	return p.Name, err
}

type answerBody struct {
	Content string          `json:"content"`
	Meta    json.RawMessage `json:"meta"`
}

func (s *Server) handleAnswer(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	id, turn := r.PathValue("id"), r.PathValue("turn")
	if th, _, _, ok := khaladb.ParseTurnID(turn); !ok || th != id {
		s.fail(w, r, notFound("unknown turn %q of thread %s", turn, id))
		return
	}
	var req answerBody
	if err := decodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	ans := workflow.Answer{Content: req.Content}
	if len(req.Meta) > 0 && !bytes.Equal(req.Meta, []byte("null")) {
		if err := json.Unmarshal(req.Meta, &ans.Meta); err != nil {
			s.fail(w, r, badRequest("meta: %s", jsonErr(err)))
			return
		}
	}
	c, now, err := s.engine.AnswerHuman(r.Context(), id, turn, a.Name, ans)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, responseJSON{Turn: turn, Thread: id, Status: c.Thread.Status, Agent: a.Name, At: now})
}

// waitingOf is turn t of thread th as a person's inbox shows it.
func waitingOf(def *workflow.Definition, th *khaladb.Thread, t khaladb.Turn) workflow.Waiting {
	w := workflow.Waiting{Thread: th.ID, Workflow: th.Workflow, Ref: th.Workflow + "#" + th.ID, Turn: t.ID, Step: t.Step,
		Role: t.Role, Prompt: t.Prompt, Instruction: t.Instruction, Since: t.QueuedAt}
	if r := def.Roles[t.Role]; r != nil {
		w.RolePrompt = strings.TrimSpace(r.Prompt)
		w.AnsweredBy = r.AnsweredBy
		if r.Meta != nil {
			w.Meta = r.Meta
		}
	}
	return w
}

func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	out, err := s.inbox(r.Context(), a.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// inbox lists the human turns waiting that person may answer.
func (s *Server) inbox(ctx context.Context, person string) ([]workflow.Waiting, error) {
	turns, err := s.store.WaitingTurns(ctx)
	if err != nil {
		return nil, err
	}
	out := []workflow.Waiting{}
	threads := map[string]*khaladb.ThreadView{}
	for _, t := range turns {
		v := threads[t.Thread]
		if v == nil {
			if v, err = s.store.Thread(ctx, t.Thread); errors.Is(err, khaladb.ErrNotFound) {
				continue
			} else if err != nil {
				return nil, err
			}
			threads[t.Thread] = v
		}
		def, err := s.engine.Definition(ctx, v.Thread.SourceHash)
		if err != nil {
			return nil, err
		}
		if who := def.Answerers(t.Role); v.Thread.Ended() || (len(who) > 0 && !slices.Contains(who, person)) {
			continue
		}
		out = append(out, waitingOf(def, &v.Thread, t))
	}
	return out, nil
}
