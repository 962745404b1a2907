package khala

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// When an agent was last seen (GET /v1/agents) is when it last made an
// authenticated request. A durable write per request would add one to
// every claim and heartbeat, so each replica keeps the time in memory
// and writes the agents it saw at most once a seenFlush, in one
// SawAgents call. An agent's last_seen is the later of this replica's
// time and the stored one: exact on a single server, and at most
// seenFlush behind for an agent seen only through other replicas. A
// replica that dies loses at most its last seenFlush of sightings.
const seenFlush = time.Minute

// lastSeen is one replica's memory of when agents made requests.
type lastSeen struct {
	at sync.Map // agent name -> *atomic.Int64: unix nanos of its last request here

	mu      sync.Mutex       // one flush at a time
	written map[string]int64 // what flush last stored, by agent
}

// saw notes agent's request at now: the hot path, no lock.
func (l *lastSeen) saw(agent string, now time.Time) {
	v, ok := l.at.Load(agent)
	if !ok {
		v, _ = l.at.LoadOrStore(agent, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(now.UnixNano())
}

// get returns when this replica last saw agent (zero: never).
func (l *lastSeen) get(agent string) time.Time {
	v, ok := l.at.Load(agent)
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, v.(*atomic.Int64).Load()).UTC()
}

// flush stores the sightings made since the last flush.
func (l *lastSeen) flush(ctx context.Context, st khaladb.Storage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]time.Time{}
	l.at.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != l.written[k.(string)] {
			seen[k.(string)] = time.Unix(0, n).UTC()
		}
		return true
	})
	if len(seen) == 0 {
		return nil
	}
	if err := st.SawAgents(ctx, seen); err != nil {
		return err
	}
	if l.written == nil {
		l.written = map[string]int64{}
	}
	for name, at := range seen {
		l.written[name] = at.UnixNano()
	}
	return nil
}

// runSeen flushes sightings every seenFlush until ctx ends, and once more
// then, so a graceful restart loses none.
func (s *Server) runSeen(ctx context.Context) {
	tick := time.NewTicker(seenFlush)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.flushSeen(fctx)
			return
		case <-tick.C:
			s.flushSeen(ctx)
		}
	}
}

func (s *Server) flushSeen(ctx context.Context) {
	if err := s.seen.flush(ctx, s.store); err != nil {
		s.log.Warn("record when agents were last seen; retried at the next flush", "err", err)
	}
}

// agentJSON is an enrolled agent as GET /v1/agents lists it: last_seen
// null when it made no request since it was recorded, turns_held null
// when it holds none.
type agentJSON struct {
	Name       string     `json:"name"`
	EnrolledAt time.Time  `json:"enrolled_at"`
	LastSeen   *time.Time `json:"last_seen"`
	TurnsHeld  []string   `json:"turns_held"`
	// Scopes are the token's; absent: issued before scopes (the legacy
	// set, see DescribeScopes).
	Scopes []string `json:"scopes,omitempty"`
}

func (s *Server) handleAgents(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	as, err := s.store.Agents(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]agentJSON, 0, len(as))
	for _, a := range as {
		aj := agentJSON{Name: a.Name, EnrolledAt: a.EnrolledAt, TurnsHeld: a.Held, Scopes: a.Scopes}
		last := a.LastSeen
		if here := s.seen.get(a.Name); here.After(last) {
			last = here
		}
		if !last.IsZero() {
			aj.LastSeen = &last
		}
		out = append(out, aj)
	}
	writeJSON(w, http.StatusOK, out)
}
