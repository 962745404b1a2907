package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// AnswerHuman records person's answer a to the human turn of thread id:
// the one path of the API's answer endpoint and the console's form. It
// returns the change committed and its time.
func (e *Engine) AnswerHuman(ctx context.Context, id, turn, person string, a workflow.Answer) (*khaladb.ThreadChange, time.Time, error) {
	var (
		c   *khaladb.ThreadChange
		now time.Time
	)
	err := e.updateRouted(ctx, id, func(v *khaladb.ThreadView, rt routing) (*khaladb.ThreadChange, error) {
		now = e.now()
		var err error
		c, err = answerHuman(ctx, e.defs, v, turn, person, a, rt, now)
		return c, err
	})
	if errors.Is(err, errTurnClosed) {
		err = e.closedHumanTurn(ctx, turn)
	}
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown thread %q", id)
	}
	if err != nil {
		return nil, now, err
	}
	e.changed(c)
	e.log.Info("turn answered by a person", "turn", turn, "person", person)
	return c, now, nil
}

// answerHuman records person's answer a to the human turn turnID of v.
// Nothing is recorded unless the turn waits, the person may answer it and
// the answer fits the role.
func answerHuman(ctx context.Context, defs *defCache, v *khaladb.ThreadView, turnID, person string, a workflow.Answer,
	rt routing, now time.Time) (*khaladb.ThreadChange, error) {
	th := v.Thread
	if th.Ended() {
		return nil, fmt.Errorf("%w: %s is %s; its turns take no answers", khaladb.ErrThreadEnded, th.ID, th.Status)
	}
	t := v.Turn(turnID)
	switch {
	case t == nil:
		return nil, errTurnClosed
	case t.State != khaladb.TurnWaiting:
		return nil, conflict(CodeNotWaiting, "turn %s (%s) is not a person's: an agent or a child thread answers it", t.ID, t.Role)
	}
	def, err := defs.get(ctx, th.SourceHash)
	if err != nil {
		return nil, err
	}
	if who := def.Answerers(t.Role); len(who) > 0 && !slices.Contains(who, person) {
		return nil, forbidden("%s may not answer turn %s: role %s is answered by %s", person, t.ID, t.Role, workflow.WhoAnswers(who))
	}
	if err := def.CheckAnswer(t.Role, a.Content, a.Meta); err != nil {
		ie := &Error{Kind: KindBadRequest, Code: CodeInvalidAnswer, Msg: err.Error()}
		var ae *workflow.AnswerError
		if errors.As(err, &ae) {
			ie.Field = ae.Field
		}
		return nil, ie
	}
	m := workflow.Message{Agent: person, Content: a.Content, Meta: a.Meta}
	ev := workflow.Event{At: now, Type: workflow.EventTurnAnswered, Thread: th.ID, Step: t.Step, Role: t.Role, Agent: person,
		Turn: t.ID, Attempt: t.Attempt}
	return closeTurn(ctx, def, nil, v, t, m, ev, rt, now)
}

// closedHumanTurn says why a turn of a running thread takes no answer.
func (e *Engine) closedHumanTurn(ctx context.Context, turn string) error {
	t, err := e.store.Turn(ctx, turn)
	switch {
	case errors.Is(err, khaladb.ErrNotFound):
		return notFound("unknown turn %q", turn)
	case err != nil:
		return err
	case t.State == khaladb.TurnAnswered:
		return conflict(CodeNotWaiting, "turn %s was already answered", turn)
	}
	return conflict(CodeNotWaiting, "turn %s is %s, not waiting for an answer", turn, t.State)
}
