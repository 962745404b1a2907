package khala

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"github.com/nerve-agents/nerve/workflow"
)

// threadJSON is a thread as the API shows it: the workflow package's
// thread shape (what the daemon serves for local threads) plus its open
// turns.
type threadJSON struct {
	*workflow.Thread
	Initiator string     `json:"initiator,omitempty"`
	Turns     []turnJSON `json:"turns,omitempty"`
}

// childrenOf summarises a thread's children as every thread object shows
// them (workflow.Children): counts by status, refs in the order they
// started; nil when it started none.
func childrenOf(links []khaladb.ChildLink) *workflow.Children {
	if len(links) == 0 {
		return nil
	}
	out := &workflow.Children{Counts: map[string]int{}, Refs: make([]string, 0, len(links))}
	for _, l := range links {
		out.Counts[l.Status]++
		out.Refs = append(out.Refs, l.Workflow+"#"+l.Thread)
	}
	return out
}

type turnJSON struct {
	Turn         string    `json:"turn"`
	Step         int       `json:"step"`
	Role         string    `json:"role"`
	State        string    `json:"state"`
	Attempt      int       `json:"attempt"`
	Agent        string    `json:"agent,omitempty"`
	Child        string    `json:"child,omitempty"` // a child turn's thread
	Priority     int       `json:"priority"`
	QueuedAt     time.Time `json:"queued_at"`
	LeaseExpires time.Time `json:"lease_expires_at,omitzero"`
}

func newThreadJSON(t khaladb.Thread, turns []khaladb.Turn) threadJSON {
	wt := t.Thread
	wt.Source = nil
	wt.Children = childrenOf(t.Children)
	out := threadJSON{Thread: &wt, Initiator: t.Initiator}
	for _, tt := range turns {
		if tt.Open() {
			tj := turnJSON{Turn: tt.ID, Step: tt.Step, Role: tt.Role, State: tt.State,
				Attempt: tt.Attempt, Agent: tt.Agent, Child: tt.Child, Priority: tt.Priority, QueuedAt: tt.QueuedAt}
			if tt.State == khaladb.TurnClaimed {
				tj.LeaseExpires = tt.LeaseExpires
			}
			out.Turns = append(out.Turns, tj)
		}
	}
	return out
}

// threadDetail is GET /v1/threads/{id}'s thread: with its human turns
// waiting (turn ids, so a person can answer by thread ref) and its
// children's statuses as their own records have them.
func (s *Server) threadDetail(ctx context.Context, v *khaladb.ThreadView) (threadJSON, error) {
	th := v.Thread
	var err error
	if th.Children, err = s.childLinks(ctx, th.Children); err != nil {
		return threadJSON{}, err
	}
	out := newThreadJSON(th, v.Turns)
	for _, t := range v.Turns {
		if t.State != khaladb.TurnWaiting {
			continue
		}
		def, err := s.engine.Definition(ctx, th.SourceHash)
		if err != nil {
			return out, err
		}
		out.Waiting = append(out.Waiting, waitingOf(def, &th, t))
	}
	return out, nil
}

// childLinks are a thread's child links with the children's statuses as
// their own records have them: the parent's copy lags when a delivery was
// missed; the sweeper catches up, the reader need not wait for it.
func (s *Server) childLinks(ctx context.Context, links []khaladb.ChildLink) ([]khaladb.ChildLink, error) {
	links = slices.Clone(links)
	for i, l := range links {
		if l.Status != workflow.StatusRunning {
			continue
		}
		if cv, err := s.store.Thread(ctx, l.Thread); err == nil {
			links[i].Status = cv.Thread.Status
		} else if !errors.Is(err, khaladb.ErrNotFound) {
			return nil, err
		}
	}
	return links, nil
}

var statuses = []string{workflow.StatusRunning, workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled}

func (s *Server) handleThreads(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	q := r.URL.Query()
	tq := khaladb.ThreadQuery{Workflow: q.Get("workflow"), Status: q.Get("status"), Limit: 100}
	if tq.Status != "" && !contains(statuses, tq.Status) {
		s.fail(w, r, badRequest("status %q: want one of running, completed, failed, cancelled", tq.Status))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.fail(w, r, badRequest("limit %q: want a number from 1 to 1000", v))
			return
		}
		tq.Limit = n
	}
	ts, err := s.store.Threads(r.Context(), tq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]threadJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, newThreadJSON(t, nil))
	}
	writeJSON(w, http.StatusOK, out)
}

// view reads the thread named by the path, answering 404 itself.
func (s *Server) view(w http.ResponseWriter, r *http.Request) *khaladb.ThreadView {
	id := r.PathValue("id")
	v, err := s.store.Thread(r.Context(), id)
	if errors.Is(err, khaladb.ErrNotFound) {
		err = notFound("unknown thread %q", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return nil
	}
	return v
}

func (s *Server) handleThread(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	v := s.view(w, r)
	if v == nil {
		return
	}
	out, err := s.threadDetail(r.Context(), v)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	id := r.PathValue("id")
	by := callerOf(r)
	th, err := s.engine.Cancel(r.Context(), id, a.Name, func(v *khaladb.ThreadView) error {
		if !by.overrides(ScopeCancel) && (by.kind != callerAgent || by.name != v.Thread.Initiator) {
			if by.kind == callerPerson {
				return needScope(by, ScopeCancel)
			}
			return notYours("thread "+v.Thread.ID, v.Thread.Initiator)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("thread cancelled", "thread", id, "agent", a.Name)
	writeJSON(w, http.StatusOK, map[string]string{"thread": id, "status": th.Status})
}

// messageFilter parses ?role=&last=&since=&step=.
func messageFilter(r *http.Request) (workflow.Filter, error) {
	q := r.URL.Query()
	f := workflow.Filter{Role: q.Get("role")}
	if v := q.Get("last"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, badRequest("last %q: want a number of messages, 0 or more", v)
		}
		f.Last = n
	}
	if v := q.Get("step"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, badRequest("step %q: want a step number, 1 or more", v)
		}
		f.Step = n
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, badRequest("since %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", v)
		}
		f.Since = t
	}
	return f, nil
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	f, err := messageFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if v := s.view(w, r); v != nil {
		writeJSON(w, http.StatusOK, f.Apply(khaladb.WithStepErrors(&v.Thread, v.Messages)))
	}
}

func (s *Server) handleTrace(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	if v := s.view(w, r); v == nil {
		return
	}
	evs, err := s.store.Events(r.Context(), r.PathValue("id"), 0, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if evs == nil {
		evs = []workflow.Event{}
	}
	writeJSON(w, http.StatusOK, evs)
}

// sseKeepAlive is how often an idle event stream sends a comment, so
// proxies do not cut it.
const sseKeepAlive = 15 * time.Second

// handleEvents streams the trace as server-sent events: what exists, then
// each new event as it is committed, ending after the thread's end. A
// reconnecting client resumes with Last-Event-ID (or ?after=SEQ).
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	v := s.view(w, r)
	if v == nil {
		return
	}
	id := v.Thread.ID
	after, err := eventCursor(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	keepAlive := time.NewTicker(sseKeepAlive)
	defer keepAlive.Stop()
	for {
		changed := s.store.Changed(khaladb.ThreadTopic(id))
		evs, err := s.store.Events(r.Context(), id, after, 500)
		if err != nil {
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.RequestTimeout))
		ended := false
		for _, e := range evs {
			data, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, data); err != nil {
				return
			}
			after = e.Seq
			ended = ended || e.Type == workflow.EventThreadEnded
		}
		if err := rc.Flush(); err != nil {
			return
		}
		// thread.ended is always the last event: a cursor past it, on an
		// ended thread, has nothing more to wait for.
		if ended || (len(evs) == 0 && v.Thread.Ended()) {
			return
		}
		if len(evs) == 500 {
			continue
		}
		select {
		case <-changed:
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case <-time.After(s.opts.Recheck):
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
}

func eventCursor(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("after"); q != "" {
		v = q
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("event cursor %q: want the seq of the last event seen", v)
	}
	return n, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
