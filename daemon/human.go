package daemon

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// waitHuman is a human turn: it waits, without a lease or a timeout, until
// a person's answer is on disk (RecordAnswer, through `nerve thread
// answer`), and returns it as the step's message. A restart finds a turn
// answered while the daemon was down at once. The inbox shows the turn's
// prompt composed as an agent's would be, as Khala shows a cloud turn's.
func (r *runner) waitHuman(ctx context.Context, t *workflow.Thread, d *workflow.Definition, turn workflow.Turn, history []workflow.Message) workflow.Message {
	role := d.Roles[turn.Role]
	ref := workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String()
	w := workflow.Waiting{Thread: t.ID, Workflow: t.Workflow, Ref: ref,
		Step: turn.Step, Role: turn.Role, Prompt: workflow.Prompt(d, ref, turn, history), Instruction: turn.Instruction,
		RolePrompt: strings.TrimSpace(role.Prompt), AnsweredBy: []string{}, Since: time.Now().UTC()}
	if role.Meta != nil {
		w.Meta = role.Meta
	}
	r.setWaiting(w, true)
	defer r.setWaiting(w, false)
	for {
		changed := r.d.store.Changed(t.ID) // taken before the read: no answer slips between
		m, err := r.d.store.Answer(t.ID, turn.Step)
		if err != nil {
			r.d.log.Error("read a person's answer", "thread", t.ID, "step", turn.Step, "err", err)
		}
		if m != nil {
			return *m
		}
		select {
		case <-ctx.Done():
			return workflow.Message{} // not stored: the turn waits again on resume
		case <-changed:
		}
	}
}

func (r *runner) setWaiting(w workflow.Waiting, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		r.waiting[activeKey(w.Thread, w.Step)] = w
	} else {
		delete(r.waiting, activeKey(w.Thread, w.Step))
	}
}

// waitingTurns lists the human turns waiting now, oldest first; of one
// thread when thread is not "".
func (r *runner) waitingTurns(thread string) []workflow.Waiting {
	r.mu.Lock()
	out := make([]workflow.Waiting, 0, len(r.waiting))
	for _, w := range r.waiting {
		if thread == "" || w.Thread == thread {
			out = append(out, w)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b workflow.Waiting) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if a.Thread != b.Thread {
			return workflow.CompareThreadIDs(a.Thread, b.Thread)
		}
		return a.Step - b.Step
	})
	return out
}
