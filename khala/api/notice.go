package api

import (
	"slices"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// Notice is an agent's blocking notice (notify with level blocking) as an
// inbox lists it, from GET /v1/notices of Khala and of the daemon: it
// stays there until the thread's next turn starts or the thread ends.
type Notice struct {
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	// Ref is the thread's full ref ([REMOTE/]WORKFLOW#thread-N).
	Ref     string    `json:"ref"`
	Step    int       `json:"step"`
	Role    string    `json:"role"`
	Agent   string    `json:"agent"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// OpenNotices returns the blocking notices of a thread's trace (events
// in order) that no turn has started after and that its end did not
// close, oldest first.
func OpenNotices(workflowName string, evs []workflow.Event) []Notice {
	var out []Notice
	for _, e := range evs {
		switch e.Type {
		case EventNotify:
			if e.Status == NotifyBlocking {
				out = append(out, Notice{Thread: e.Thread, Workflow: workflowName, Ref: workflowName + "#" + e.Thread,
					Step: e.Step, Role: e.Role, Agent: e.Agent, Level: e.Status, Message: e.Message, At: e.At})
			}
		case workflow.EventTurnStarted, workflow.EventTurnWaiting, workflow.EventThreadEnded:
			out = out[:0] // the next turn started (a person's too), or the thread ended
		}
	}
	return slices.Clip(out)
}
