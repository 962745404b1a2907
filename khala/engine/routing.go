package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/nerve-agents/nerve/khala/khaladb"
	"github.com/nerve-agents/nerve/workflow"
)

// routing is what routing a thread needs beside its definition: thread
// ids reserved for the child threads it may start, and how deep children
// may nest.
type routing struct {
	ids      *reservedIDs
	maxDepth int
}

// reservedIDs are thread ids drawn before a change is made: a change is
// made inside UpdateThread, where drawing one (a database round trip on
// PostgreSQL) must not happen. An id drawn and not used is a gap.
type reservedIDs struct {
	ids  []string
	used int
}

// needIDs asks routed to draw n more ids and make the change again.
type needIDs struct{ n int }

func (e *needIDs) Error() string { return fmt.Sprintf("%d more thread ids needed", e.n) }

// childIDs takes an id for each child turn of turns.
func (rt routing) childIDs(turns []workflow.Turn) ([]string, error) {
	k := 0
	for _, t := range turns {
		if t.IsChild() {
			k++
		}
	}
	if k == 0 {
		return nil, nil
	}
	r := rt.ids
	if r == nil {
		return nil, fmt.Errorf("routing: no thread ids for %d child threads", k)
	}
	if left := len(r.ids) - r.used; left < k {
		return nil, &needIDs{k - left}
	}
	out := r.ids[r.used : r.used+k]
	r.used += k
	return out, nil
}

// routing returns what a change made by fn needs (its ids rewound: fn may
// run again).
func (e *Engine) routing(ids *reservedIDs) routing {
	ids.used = 0
	return routing{ids: ids, maxDepth: e.cfg.MaxSpawnDepth}
}

// routed runs fn, which makes a change with the ids given, drawing more
// ids each time it asks for them (a moderator started child threads).
func (e *Engine) routed(ctx context.Context, fn func(ids *reservedIDs) error) error {
	ids := &reservedIDs{}
	for range 8 {
		err := fn(ids)
		var need *needIDs
		if !errors.As(err, &need) {
			return err
		}
		for range need.n {
			id, err := e.store.NextThreadID(ctx)
			if err != nil {
				return err
			}
			ids.ids = append(ids.ids, id)
		}
	}
	return khaladb.ErrConflict
}

// updateRouted is UpdateThread for a change that may route the thread.
func (e *Engine) updateRouted(ctx context.Context, thread string, fn func(v *khaladb.ThreadView, rt routing) (*khaladb.ThreadChange, error)) error {
	return e.routed(ctx, func(ids *reservedIDs) error {
		return e.store.UpdateThread(ctx, thread, func(v *khaladb.ThreadView) (*khaladb.ThreadChange, error) {
			return fn(v, e.routing(ids))
		})
	})
}
