package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/nerve-agents/nerve/workflow"
)

// TurnInfo is who a turn's socket serves (GET /v1/turn): what a client
// pings it with.
type TurnInfo struct {
	Thread string `json:"thread"` // the turn's thread's full ref
	Step   int    `json:"step"`
}

// Hints of the turn socket's refusals.
const (
	hintOutsideTurn = "run it from your own terminal, outside any agent's turn"
	hintAnswer      = "answer from your own terminal, outside any agent's turn"
)

// turnRoutes is the control API narrowed to a turn, the one whose socket
// a request came on (turnScopeOf): its own thread (and the children it
// started) to read, notify, start children, query knowledge. Everything
// else is refused with 403 and says why: answers, other threads, the
// list of threads, status, shutdown, people, usage. It is built once and
// serves every turn's socket.
func (d *Daemon) turnRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/turn", func(w http.ResponseWriter, r *http.Request) {
		s := turnScopeOf(r)
		writeJSON(w, http.StatusOK, TurnInfo{Thread: s.ref.String(), Step: s.step})
	})
	mux.HandleFunc("GET /v1/threads/{id}", d.turnRead(d.handleThread, (*turnScope).remoteThread))
	mux.HandleFunc("GET /v1/threads/{id}/messages", d.turnRead(d.handleMessages, (*turnScope).remoteMessages))
	mux.HandleFunc("GET /v1/threads/{id}/events", d.turnRead(d.handleEvents, nil))
	mux.HandleFunc("POST /v1/threads/{id}/cancel", d.turnChildOnly(d.handleCancel))
	mux.HandleFunc("POST /v1/threads", d.turnStart)
	mux.HandleFunc("POST /v1/notify", d.turnNotify)
	mux.HandleFunc("POST /v1/knowledge/query", d.turnKnowledge)
	mux.HandleFunc("POST /v1/threads/{id}/answer", refuseAnswer)
	mux.HandleFunc("GET /v1/may-answer", refuseAnswer)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuse(w, r, fmt.Sprintf("refused: a turn's channel to nerve serves its own thread, notices, child workflows and knowledge queries, not %s %s", r.Method, r.URL.Path), hintOutsideTurn)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != apiHost || turnScopeOf(r) == nil {
			writeError(w, http.StatusForbidden, codeUsage, "bad host", "")
			return
		}
		w.Header().Set(versionHeader, d.opts.Version)
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		d.freshConfig()
		mux.ServeHTTP(w, r)
	})
}

type scopeKey struct{}

// withTurnScope keeps the turn a connection came for in its context.
func withTurnScope(ctx context.Context, s *turnScope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// turnScopeOf is the turn whose socket r came on.
func turnScopeOf(r *http.Request) *turnScope {
	s, _ := r.Context().Value(scopeKey{}).(*turnScope)
	return s
}

// refuse answers 403 with msg, and logs it: the owner learns what a
// turn tried.
func refuse(w http.ResponseWriter, r *http.Request, msg, hint string) {
	if s := turnScopeOf(r); s != nil && s.log != nil {
		s.log.Info("turn socket refused a request", "thread", s.ref.String(), "step", s.step, "request", r.Method+" "+r.URL.Path, "why", msg)
	}
	writeError(w, http.StatusForbidden, codeForbidden, msg, hint)
}

// refuseAnswer: an agent never answers a human turn, of its own thread or
// any other, nor asks whether it may (the CLI's check before a remote's
// answer).
func refuseAnswer(w http.ResponseWriter, r *http.Request) {
	s := turnScopeOf(r)
	refuse(w, r, fmt.Sprintf("refused: this answer comes from inside a running turn (%s step %d); an agent never approves its own work", s.ref, s.step), hintAnswer)
}

// turnRead serves a read of thread {id} when it is the turn's own (a
// remote turn's through remote, which has only the turn's copy; nil: not
// served) or, for a local turn, a child it or its thread started.
func (d *Daemon) turnRead(local http.HandlerFunc, remote func(*turnScope, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, id := turnScopeOf(r), r.PathValue("id")
		switch {
		case s.ref.Remote != "" && id == s.ref.Thread && remote != nil:
			remote(s, w, r)
		case s.ref.Remote != "":
			refuse(w, r, fmt.Sprintf("refused: a remote turn (%s) reads only its own thread's messages here, not %s", s.ref, id), "read the thread at its remote "+s.ref.Remote)
		case id == s.ref.Thread || d.descends(id, s.ref.Thread):
			local(w, r)
		default:
			s.refuseThread(w, r, id)
		}
	}
}

// turnChildOnly serves a request about thread {id} when it descends from
// the turn's thread (cancel a child it started).
func (d *Daemon) turnChildOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, id := turnScopeOf(r), r.PathValue("id")
		if s.ref.Remote == "" && d.descends(id, s.ref.Thread) {
			h(w, r)
			return
		}
		s.refuseThread(w, r, id)
	}
}

func (s *turnScope) refuseThread(w http.ResponseWriter, r *http.Request, id string) {
	refuse(w, r, fmt.Sprintf("refused: a turn reads only its own thread (%s) and the children it started, not %s", s.ref, id), hintOutsideTurn)
}

// maxDescent bounds the walk up a thread's parents; max_spawn_depth is far
// smaller.
const maxDescent = 64

// descends reports whether local thread id is a child (or a child's
// child...) of thread anc.
func (d *Daemon) descends(id, anc string) bool {
	for range maxDescent {
		t, err := d.store.Thread(id)
		if err != nil || t.Parent == nil {
			return false
		}
		if t.Parent.Thread == anc {
			return true
		}
		id = t.Parent.Thread
	}
	return false
}

// remoteThread is a remote turn's own thread as this daemon knows it:
// running, at the turn's step.
func (s *turnScope) remoteThread(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, &workflow.Thread{ID: s.ref.Thread, Workflow: s.ref.Workflow, Status: workflow.StatusRunning, Step: s.step})
}

// remoteMessages are a remote turn's own thread's messages as its
// snapshot holds them.
func (s *turnScope) remoteMessages(w http.ResponseWriter, r *http.Request) {
	f, err := workflow.ParseFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "")
		return
	}
	msgs := f.Apply(s.history)
	if msgs == nil {
		msgs = []workflow.Message{}
	}
	writeJSON(w, http.StatusOK, msgs)
}

// turnStart starts a child of a local turn's thread, as the control
// socket would for the turn's `nerve workflow run` or workflow_run, with
// the parent set to the turn (whatever the request says), its depth and
// its budget checked, and the child's workdir, definition file and
// repository where the turn works.
func (d *Daemon) turnStart(w http.ResponseWriter, r *http.Request) {
	s := turnScopeOf(r)
	if s.ref.Remote != "" {
		refuse(w, r, fmt.Sprintf("refused: a remote turn (%s) may not start this machine's local workflows; its children run on its remote %s", s.ref, s.ref.Remote),
			fmt.Sprintf("run a workflow of that remote: nerve workflow run %s/NAME", s.ref.Remote))
		return
	}
	var req StartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	if msg := s.narrowStart(&req); msg != "" {
		refuse(w, r, msg, "a turn's child works in the turn's workdir or its own scratch directory")
		return
	}
	if msg := d.overBudget(s.ref.Thread); msg != "" {
		writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("%s may start no child: %s", s.ref, msg), "")
		return
	}
	d.startThread(w, r, req)
}

// narrowStart makes req a child of the turn's and says why it is refused,
// "" when it is not.
func (s *turnScope) narrowStart(req *StartRequest) string {
	req.Parent, req.ParentTurn, req.Priority = s.ref.String(), s.step, nil
	if req.Workdir != "" && !within(req.Workdir, s.workdir) {
		return fmt.Sprintf("refused: a turn's child works where the turn does (%s), not in %s", s.workdirName(), req.Workdir)
	}
	if req.File != "" && !within(req.File, s.workdir) {
		return fmt.Sprintf("refused: a turn starts a definition file from where it works (%s), not %s", s.workdirName(), req.File)
	}
	if ws := req.Workspace; ws != nil && ws.Repo != "" {
		repo := ws.Repo
		if !filepath.IsAbs(repo) {
			repo = filepath.Join(req.Workdir, repo)
		}
		if !within(repo, s.workdir) {
			return fmt.Sprintf("refused: a turn's child works in a repository where the turn works (%s), not %s", s.workdirName(), ws.Repo)
		}
	}
	return ""
}

func (s *turnScope) workdirName() string {
	if s.workdir == "" {
		return "its own scratch directory"
	}
	return s.workdir
}

// within reports whether path is dir or under it, both with their
// symbolic links resolved (a link the agent made in its workdir may point
// anywhere). A path that does not exist is not within.
func within(path, dir string) bool {
	if dir == "" || !filepath.IsAbs(path) {
		return false
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// overBudget says why local thread id may start no more children: it
// spent its budget. "" when it may (or its definition cannot be read:
// the start's own checks answer then).
func (d *Daemon) overBudget(id string) string {
	t, err := d.store.Thread(id)
	if err != nil || len(t.Source) == 0 {
		return ""
	}
	def, err := workflow.ParseStored(t.Workflow, t.Source)
	if err != nil {
		return ""
	}
	spent := t.Usage
	if late, err := d.store.ChildSpend(t.ID); err == nil {
		spent.Merge(late)
	}
	return def.Budget().Exceeded(spent)
}

// turnNotify puts a notice in the turn's own thread's trace, at the
// turn's step.
func (d *Daemon) turnNotify(w http.ResponseWriter, r *http.Request) {
	s := turnScopeOf(r)
	var req NotifyRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	if req.Thread == "" {
		req.Thread = s.ref.String()
	}
	if ref, err := workflow.ParseRef(req.Thread); err == nil && ref != s.ref {
		refuse(w, r, fmt.Sprintf("refused: a turn notifies its own thread (%s), not %s", s.ref, req.Thread), "")
		return
	}
	req.Step = s.step
	d.notify(w, r, req)
}

// turnKnowledge answers a knowledge query of repositories where the turn
// works (the CLI queries in its own process when refused).
func (d *Daemon) turnKnowledge(w http.ResponseWriter, r *http.Request) {
	s := turnScopeOf(r)
	var req KnowledgeQueryRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	for _, root := range req.Roots {
		if !within(root, s.workdir) {
			refuse(w, r, fmt.Sprintf("refused: a turn queries the knowledge of repositories where it works (%s), not %s", s.workdirName(), root), "")
			return
		}
	}
	d.knowledgeQuery(w, r, req)
}
