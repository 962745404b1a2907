package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

// remoteAnswer answers a human turn of a remote thread: the thread's
// waiting turn (the one at step, or its only one), through the answer
// endpoint, unless it is sent from inside a turn here.
func remoteAnswer(ctx context.Context, f *Factory, ref workflow.Ref, step int, a workflow.Answer) (answerJSON, error) {
	if err := f.refuseInsideTurn(ctx); err != nil {
		return answerJSON{}, err
	}
	c, err := remoteClient(f, ref.Remote)
	if err != nil {
		return answerJSON{}, err
	}
	t, err := c.Thread(ctx, ref.Thread)
	if err != nil {
		return answerJSON{}, remoteUsage(err)
	}
	w, err := pickWaiting(ref, t, step)
	if err != nil {
		return answerJSON{}, err
	}
	// With the person token stored for the remote: an agent's is refused.
	by, err := c.Answer(ctx, t.ID, w.Turn, a)
	if re := (*remote.Error)(nil); errors.As(err, &re) && re.Code == "invalid_answer" && strings.Contains(re.Message, "meta") {
		return answerJSON{}, metaRefused(err, ref, w)
	}
	if err != nil {
		return answerJSON{}, remoteUsage(err)
	}
	return answerJSON{Thread: ref.String(), Step: w.Step, Role: w.Role, By: by}, nil
}

// pickWaiting chooses the waiting turn of t an answer is for.
func pickWaiting(ref workflow.Ref, t *workflow.Thread, step int) (*workflow.Waiting, error) {
	if t.Ended() {
		return nil, &failedError{msg: fmt.Sprintf("%s already ended (%s): nothing waits for an answer", ref, t.Status)}
	}
	for i := range t.Waiting {
		if step == 0 && len(t.Waiting) == 1 || t.Waiting[i].Step == step {
			return &t.Waiting[i], nil
		}
	}
	switch {
	case step > 0:
		return nil, &failedError{msg: fmt.Sprintf("step %d of %s is not waiting for a person", step, ref)}
	case len(t.Waiting) == 0:
		return nil, &failedError{msg: fmt.Sprintf("no turn of %s waits for a person", ref)}
	}
	return nil, usageErrorf("name one with --step N", "%d turns of %s wait for a person", len(t.Waiting), ref)
}

// parentThread is the thread a workflow started from inside a turn is a
// child of: the turn's ($NERVE_THREAD), when it lives on the same side as
// the new thread (a local thread's children are local, a remote's are on
// that remote); "" otherwise.
func parentThread(f *Factory, ref workflow.Ref) string {
	env := f.Getenv("NERVE_THREAD")
	if env == "" {
		return ""
	}
	p, err := workflow.ParseRef(env)
	if err != nil || p.Thread == "" || p.Remote != ref.Remote {
		return ""
	}
	return env
}
