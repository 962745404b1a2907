package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
)

// AnswerRequest is a person's answer to a human turn of a local thread.
// Step 0 means the thread's only waiting human turn.
type AnswerRequest struct {
	Step    int    `json:"step,omitempty"`
	Content string `json:"content"`
	Meta    any    `json:"meta,omitempty"`
}

// AnswerResult says which turn an answer was recorded for.
type AnswerResult struct {
	Thread string `json:"thread"`
	Step   int    `json:"step"`
	Role   string `json:"role"`
	By     string `json:"by"`
}

// codeForbidden refuses an answer from inside a running turn.
const codeForbidden = "forbidden"

func (d *Daemon) handleInbox(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, d.runner.waitingTurns(""))
}

func (d *Daemon) handleAnswer(w http.ResponseWriter, r *http.Request) {
	if d.refuseFromTurn(w, r) {
		return
	}
	var req AnswerRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	t := d.thread(w, r)
	if t == nil {
		return
	}
	if t.Ended() {
		writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("%s already ended (%s): nothing waits for an answer", t.ID, t.Status), "")
		return
	}
	def, err := workflow.ParseStored(t.Workflow, t.Source)
	if err != nil {
		writeErr(w, err)
		return
	}
	turn, err := d.waitingTurn(t, def, req.Step)
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := def.CheckAnswer(turn.Role, req.Content, req.Meta); err != nil {
		var e apiError
		e.Error.Code, e.Error.Message = codeUsage, err.Error()
		var ae *workflow.AnswerError
		if errors.As(err, &ae) {
			e.Error.Field = ae.Field
		}
		writeJSON(w, http.StatusBadRequest, e)
		return
	}
	m := workflow.Message{Step: turn.Step, Role: turn.Role, Instruction: turn.Instruction, Agent: PersonName(),
		Content: req.Content, Meta: req.Meta, At: time.Now().UTC()}
	if err := d.store.RecordAnswer(t.ID, m); err != nil {
		var ac *store.AnswerConflict
		if errors.As(err, &ac) {
			writeError(w, http.StatusConflict, codeConflict, ac.Reason, "")
			return
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, AnswerResult{Thread: t.ID, Step: turn.Step, Role: turn.Role, By: m.Agent})
}

// waitingTurn finds the human turn of t an answer is for: the one at step,
// or with step 0 the only one pending.
func (d *Daemon) waitingTurn(t *workflow.Thread, def *workflow.Definition, step int) (workflow.Turn, error) {
	msgs, err := d.store.Messages(t.ID)
	if err != nil {
		return workflow.Turn{}, err
	}
	var open []workflow.Turn
	for _, p := range t.Pending {
		answered := slices.ContainsFunc(msgs, func(m workflow.Message) bool { return m.Step == p.Step })
		if def.IsHuman(p.Role) && !p.IsChild() && !answered {
			open = append(open, p)
		}
	}
	if step > 0 {
		if i := slices.IndexFunc(open, func(p workflow.Turn) bool { return p.Step == step }); i >= 0 {
			return open[i], nil
		}
		return workflow.Turn{}, &store.AnswerConflict{Reason: fmt.Sprintf("step %d of %s is not waiting for a person", step, t.ID)}
	}
	switch len(open) {
	case 0:
		return workflow.Turn{}, &store.AnswerConflict{Reason: fmt.Sprintf("no turn of %s waits for a person (step %d is running)", t.ID, t.Step)}
	case 1:
		return open[0], nil
	}
	steps := make([]string, len(open))
	for i, p := range open {
		steps[i] = fmt.Sprintf("%d (%s)", p.Step, p.Role)
	}
	return workflow.Turn{}, usage(fmt.Sprintf("%d turns of %s wait for a person: steps %s", len(open), t.ID, strings.Join(steps, ", ")), "name one with --step N")
}

// PersonName is who answers through this daemon: its user.
func PersonName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "person"
}
