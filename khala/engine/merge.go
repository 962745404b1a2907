package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// Parallel turns of a cloud thread with a workspace (DESIGN.md,
// Workspaces). Khala runs no git, so the daemons merge: each turn of a
// round of several works off the round's head and keeps its commit under
// its turn ref (api.Turn.Parallel) instead of moving the branch; when the
// last answer is in, Khala queues a merge turn (khaladb.MergeRole) instead
// of asking the moderator. Whichever daemon claims it merges the commits in
// step order and pushes the branch; its answer moves the head, puts a
// conflict on the conflicting step's message, and routes. A merge turn
// whose daemon dies is re-leased and runs again: merged commits are no-ops.

// noteRound records, as the moderator queues turns, whether they make a
// parallel round of a workspace thread. Called before th.Step moves.
func noteRound(th *khaladb.Thread, turns []workflow.Turn) {
	th.Round = nil
	if th.Workspace == nil || len(turns) < 2 {
		return
	}
	th.Round = &khaladb.Round{From: th.Workspace.Head, First: turns[0].Step, Last: turns[len(turns)-1].Step}
}

// parallelStep reports whether step's turn is one of the thread's parallel
// round: its answer's commit is under a turn ref, not the branch's head.
func parallelStep(th *khaladb.Thread, step int) bool { return th.Round.Has(step) && !th.Round.Merging }

// queueMerge queues the merge turn of c's round, whose last answer is in
// msgs (all the thread's messages, in step order), and reports whether it
// did: false when the thread has no round or nothing to merge (then the
// moderator is asked at once).
func queueMerge(def *workflow.Definition, c *khaladb.ThreadChange, msgs []workflow.Message, now time.Time) (bool, error) {
	th := &c.Thread
	r := th.Round
	if r == nil || r.Merging {
		return false, nil
	}
	work := api.Merge{From: r.From}
	for _, m := range msgs {
		if r.Has(m.Step) && m.Error == nil && m.Commit != "" && m.Commit != r.From {
			work.Turns = append(work.Turns, api.MergeTurn{Step: m.Step, Commit: m.Commit})
		}
	}
	if len(work.Turns) == 0 {
		th.Round = nil
		return false, nil
	}
	prompt, err := json.Marshal(work)
	if err != nil {
		return false, err
	}
	merging := *r
	merging.Merging = true
	th.Round = &merging
	steps := make([]string, len(work.Turns))
	for i, mt := range work.Turns {
		steps[i] = strconv.Itoa(mt.Step)
	}
	t := khaladb.Turn{ID: khaladb.TurnID(th.ID, khaladb.MergeStepBase+r.Last), Thread: th.ID, Workflow: def.Name,
		Step: khaladb.MergeStepBase + r.Last, Role: khaladb.MergeRole, Prompt: string(prompt),
		Instruction: fmt.Sprintf("merge steps %s into %s", strings.Join(steps, ", "), th.Workspace.Branch),
		Attempt:     1, MaxAttempts: max(def.Limits.MaxAttempts, 1), Lease: def.Limits.Claim.D(), Idle: def.Limits.Idle.D(),
		FirstQueued: now, QueuedAt: now, Priority: th.Priority}
	markRepo(&t, def, th)
	requeue(&t, now)
	// Pending, as every open turn, so the thread's view holds it.
	th.Pending = append(slices.Clone(th.Pending), workflow.Turn{Step: t.Step, Role: t.Role, Instruction: t.Instruction})
	c.Turns = append(c.Turns, t)
	c.Events = append(c.Events, workflow.Event{At: now, Type: EventTurnQueued, Thread: th.ID, Step: t.Step, Role: t.Role,
		Turn: t.ID, Attempt: 1, Message: t.Instruction})
	return true, nil
}

// mergeWork is what a claimed merge turn carries (nil for any other turn).
func mergeWork(t *khaladb.Turn) *api.Merge {
	if t.Role != khaladb.MergeRole {
		return nil
	}
	var w api.Merge
	if json.Unmarshal([]byte(t.Prompt), &w) != nil {
		return &api.Merge{}
	}
	return &w
}

// mergeAnswer records a merge turn's answer: the branch's new head, a
// merge error on the message whose commit did not merge (any other
// failure on the round's last), then asks the moderator what follows.
func mergeAnswer(ctx context.Context, def *workflow.Definition, docs *workflow.DocCache, v *khaladb.ThreadView, t *khaladb.Turn,
	req AnswerRequest, rt routing, now time.Time) (*khaladb.ThreadChange, error) {
	m := req.Message
	c := &khaladb.ThreadChange{Thread: v.Thread}
	done := *t
	done.State = khaladb.TurnAnswered
	c.Turns = []khaladb.Turn{done}
	ev := workflow.Event{At: now, Type: workflow.EventTurnAnswered, Thread: t.Thread, Step: t.Step, Role: t.Role,
		Agent: req.Agent, Turn: t.ID, Claim: t.Claim, Attempt: t.Attempt, Message: "merged into " + short(m.Commit)}
	th := &c.Thread
	r := th.Round
	th.Round, th.UpdatedAt = nil, now
	th.Pending = slices.DeleteFunc(slices.Clone(th.Pending), func(p workflow.Turn) bool { return p.Step == t.Step })
	th.Workspace = movedHead(th.Workspace, m.Commit)
	if m.Error != nil {
		step := req.Step
		if !r.Has(step) && r != nil {
			step = r.Last
		}
		th.StepErrors = append(append([]khaladb.StepError(nil), th.StepErrors...), khaladb.StepError{Step: step, Error: *m.Error})
		ev.Type, ev.Message = workflow.EventTurnFailed, fmt.Sprintf("step %d: %s: %s", step, m.Error.Kind, m.Error.Message)
	}
	c.Events = []workflow.Event{ev}
	msgs := khaladb.WithStepErrors(th, v.Messages)
	return c, routeThread(ctx, def, c, msgs, openTurns(v, t.ID), docs, rt, now)
}

// short is a commit's first 12 hex digits, for a trace line.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// threadWS is what a claim tells of a claimed turn's thread: its workspace
// and its parallel round.
type threadWS struct {
	ws    *workflow.Workspace
	round *khaladb.Round
}

// movedHead is the thread's workspace after an answer with commit: a
// copy (the view's record may be shared), or ws itself when nothing moves.
func movedHead(ws *workflow.Workspace, commit string) *workflow.Workspace {
	if ws == nil || commit == "" || ws.Head == commit {
		return ws
	}
	moved := *ws
	moved.Head = commit
	return &moved
}
