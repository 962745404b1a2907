package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nerve-agents/nerve/workflow"
)

// A remote thread's turn runs here on behalf of whoever created the thread
// on the Khala, someone this machine's owner need not trust. Its children
// are cloud children on the same Khala (DESIGN.md, "People and child
// workflows as turns"): it may not start this machine's own workflows,
// whose adapters may run with `permissions: full`. The CLI and the MCP
// server send a remote turn's bare names to its remote already; this is
// the daemon's own check, by the process that asks (SO_PEERCRED, as for
// answers in peer.go), since an agent can unset NERVE_THREAD.

// refuseRemoteTurnStart answers 403 and returns true when r, a request to
// start a local thread, comes from a remote turn's processes.
func (d *Daemon) refuseRemoteTurnStart(w http.ResponseWriter, r *http.Request) bool {
	pid, err := peerPID(r)
	if errors.Is(err, errNotUnix) {
		return false
	}
	var msg, hint string
	if err != nil {
		msg = "refused: cannot tell which process asks to start a local workflow: " + err.Error()
	} else {
		msg, hint = d.runner.remoteTurnRefusal(pid)
	}
	if msg == "" {
		return false
	}
	writeError(w, http.StatusForbidden, codeForbidden, msg, hint)
	return true
}

// remoteTurnRefusal says why process pid may not start a local thread, ""
// when it may: it is no turn's (a person's terminal, a script), or a
// local turn's.
func (r *runner) remoteTurnRefusal(pid int) (msg, hint string) {
	if r.refusal(pid) == "" {
		return "", "" // not the daemon's descendant: outside any turn
	}
	turn := r.turnOf(pid) // "THREAD step N"; THREAD is a ref for a remote turn
	thread, _, _ := strings.Cut(turn, " step ")
	if turn == "" {
		// It left its turn's group and outlived its parent: its
		// environment is all that says which turn it comes from.
		thread = environOf(pid)["NERVE_THREAD"]
		if thread == "" {
			return fmt.Sprintf("refused: cannot tell which turn process %d comes from, and a remote turn may not start this machine's local workflows", pid),
				"start local workflows from a local turn or from outside any turn"
		}
	}
	ref, err := workflow.ParseRef(thread)
	if err != nil || ref.Remote == "" {
		return "", "" // a local turn's
	}
	return fmt.Sprintf("refused: a remote turn (%s) may not start this machine's local workflows; its children run on its remote %s", thread, ref.Remote),
		fmt.Sprintf("run a workflow of that remote: nerve workflow run %s/NAME", ref.Remote)
}
