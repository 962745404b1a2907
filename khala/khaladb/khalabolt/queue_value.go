package khalabolt

import (
	"bytes"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// A queue entry's value holds what a claim filters on, so matching a
// claim reads no turn: workflow \0 role \0 repository \0 declared ("1"
// when the turn's workflow declares that repository). Entries written
// before repositories were filtered end after the role: their turns pass
// every repository filter (the serving daemon still refuses what it does
// not fetch).

type queueEntry struct {
	workflow, role, repo string
	declared             bool
}

// queueValue is turn t's queue entry value.
func queueValue(t *khaladb.Turn) []byte {
	declared := "0"
	if t.RepoDeclared {
		declared = "1"
	}
	return []byte(t.Workflow + "\x00" + t.Role + "\x00" + t.Repo + "\x00" + declared)
}

func parseQueueValue(v []byte) queueEntry {
	parts := bytes.SplitN(v, []byte{0}, 4)
	e := queueEntry{workflow: string(parts[0])}
	if len(parts) > 1 {
		e.role = string(parts[1])
	}
	if len(parts) == 4 {
		e.repo, e.declared = string(parts[2]), string(parts[3]) == "1"
	}
	return e
}
