package khaladb

import "github.com/nerve-agents/nerve/workflow"

// MergeRole is the role of a merge turn: when the last answer of a
// parallel round of a workspace thread is in, Khala (which runs no git)
// queues one for any serving agent's daemon to merge the round's commits
// into the thread branch. A claim takes it whatever roles it names (an
// agent serving the workflow reaches its repository; one serving only
// other workflows may not), it is leased like any turn, and it never
// becomes a message.
const MergeRole = "nerve.merge"

// MergeStepBase numbers merge turns apart from the moderator's steps: the
// merge of the round whose last step is S is step MergeStepBase+S, so the
// thread's step count (and max_steps) never sees it.
const MergeStepBase = 1 << 30

// Round is a workspace thread's parallel round: turns queued together,
// each working off From and keeping its commit under a turn ref instead of
// moving the branch. Merging says the merge turn is queued.
type Round struct {
	From    string `json:"from"`
	First   int    `json:"first"`
	Last    int    `json:"last"`
	Merging bool   `json:"merging,omitempty"`
}

// Has reports whether step is one of the round's turns.
func (r *Round) Has(step int) bool { return r != nil && step >= r.First && step <= r.Last }

// StepError is an error put on a stored message after it was recorded
// (a merge conflict names the step whose commit did not merge). Messages
// are stored once and never rewritten (both backends cache them), so the
// thread record keeps these and readers lay them over the messages.
type StepError struct {
	Step  int                   `json:"step"`
	Error workflow.MessageError `json:"error"`
}

// WithStepErrors returns msgs with th's step errors laid over them: a copy
// when any applies (msgs may be a backend's cache), msgs itself otherwise.
func WithStepErrors(th *Thread, msgs []workflow.Message) []workflow.Message {
	if len(th.StepErrors) == 0 {
		return msgs
	}
	out := make([]workflow.Message, len(msgs))
	copy(out, msgs)
	for _, se := range th.StepErrors {
		for i := range out {
			if out[i].Step == se.Step {
				e := se.Error
				out[i].Error = &e
			}
		}
	}
	return out
}
