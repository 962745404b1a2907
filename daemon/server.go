package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/config/validation"
	"github.com/nerve-agents/nerve/internal/yamlfile"
	"github.com/nerve-agents/nerve/knowledge"
	"github.com/nerve-agents/nerve/store"
	"github.com/nerve-agents/nerve/workflow"
	"github.com/nerve-agents/nerve/workspace"
)

// maxBody bounds a request body: inputs are small.
const maxBody = 4 << 20

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.HandleFunc("POST /v1/threads", d.handleStart)
	mux.HandleFunc("GET /v1/threads", d.handleThreads)
	mux.HandleFunc("GET /v1/threads/{id}", d.handleThread)
	mux.HandleFunc("POST /v1/threads/{id}/cancel", d.handleCancel)
	mux.HandleFunc("GET /v1/threads/{id}/messages", d.handleMessages)
	mux.HandleFunc("GET /v1/threads/{id}/events", d.handleEvents)
	mux.HandleFunc("POST /v1/threads/{id}/answer", d.handleAnswer)
	mux.HandleFunc("GET /v1/inbox", d.handleInbox)
	mux.HandleFunc("GET /v1/notices", d.handleNotices)
	mux.HandleFunc("GET /v1/may-answer", d.handleMayAnswer)
	mux.HandleFunc("GET /v1/usage", d.handleUsage)
	mux.HandleFunc("POST /v1/notify", d.handleNotify)
	mux.HandleFunc("POST /v1/knowledge/query", d.handleKnowledgeQuery)
	mux.HandleFunc("POST /v1/shutdown", d.handleShutdown)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != apiHost {
			writeError(w, http.StatusForbidden, codeUsage, "bad host", "")
			return
		}
		w.Header().Set(versionHeader, d.opts.Version)
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		d.freshConfig()
		mux.ServeHTTP(w, r)
	})
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) {
	cfg := d.config()
	d.mu.RLock()
	cs := d.cfgState
	d.mu.RUnlock()
	used, _ := d.capacity.Used()
	st := Status{PID: os.Getpid(), Home: d.paths.Home, Version: d.opts.Version, StartedAt: d.start,
		Config: cs, Capacity: cfg.Agent.MaxConcurrentTurns, ClaimedSlots: used, Threads: d.runner.running(),
		ActiveTurns: d.runner.activeTurns(), Senses: []SenseState{}, Adapters: d.adapterStatus(),
		Sandbox: SandboxStatusOf(cfg)}
	d.mu.RLock()
	if d.senses != nil {
		st.Senses = d.senses.states(cfg)
	}
	d.mu.RUnlock()
	if items, err := d.store.Outbox(); err == nil {
		st.Outbox = len(items)
	}
	writeJSON(w, http.StatusOK, st)
}

func (d *Daemon) handleStart(w http.ResponseWriter, r *http.Request) {
	if d.refuseRemoteTurnStart(w, r) {
		return
	}
	var req StartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, "malformed request: "+err.Error(), "")
		return
	}
	d.startThread(w, r, req)
}

// startThread starts the thread req asks for and answers with it: the
// control socket's start and a turn's child start (turnsocket.go) alike.
func (d *Daemon) startThread(w http.ResponseWriter, r *http.Request, req StartRequest) {
	cfg := d.config()
	var (
		def *workflow.Definition
		err error
	)
	switch {
	case req.File != "":
		def, err = workflow.LoadFile(req.File)
	case req.Workflow != "":
		def, err = workflow.Find(cfg.Workflows, req.Workflow)
	default:
		writeError(w, http.StatusBadRequest, codeUsage, "name a workflow or a definition file", "")
		return
	}
	if err == nil {
		err = checkRunnable(def, cfg)
	}
	var input map[string]any
	if err == nil {
		input, err = def.CheckInputs(req.Input)
	}
	if err == nil && req.Workdir != "" {
		if fi, serr := os.Stat(req.Workdir); serr != nil || !fi.IsDir() {
			err = usage(fmt.Sprintf("workdir %s does not exist or is not a directory", req.Workdir), "")
		}
	}
	var ws *workspace.Workspace
	if err == nil {
		ws, err = workspaceRequest(def, req)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	spec := threadSpec{Input: input, Workdir: req.Workdir, Workspace: ws}
	if d.runner.scratch.Contains(req.Workdir) {
		// Started from inside a turn's scratch directory (an agent's
		// `nerve workflow run`): that directory goes when its thread
		// ends, so the new thread gets its own.
		spec.Workdir = ""
	}
	if req.File != "" {
		spec.Defs = filepath.Dir(req.File)
	}
	if err == nil && req.Parent != "" {
		spec.Parent, spec.Depth, err = d.parentOf(req.Parent, req.ParentTurn)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	t, err := d.runner.start(r.Context(), def, spec)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, publicThread(t))
}

// checkRunnable refuses what could only fail later: a cloud definition
// (its turns go to a Khala queue) or a role naming an adapter that does
// not exist.
func checkRunnable(def *workflow.Definition, cfg *config.Config) error {
	if def.Binding != workflow.BindingLocal {
		return usage(fmt.Sprintf("workflow %s has binding %s; run it on a remote: nerve workflow push %s REMOTE", def.Name, def.Binding, def.Name), "")
	}
	if errs := validation.RoleAdapters(def, cfg); len(errs) > 0 {
		return errs
	}
	return nil
}

func (d *Daemon) handleThreads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	ts, err := d.store.Threads(q.Get("workflow"), q.Get("status"), limit)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := make([]*workflow.Thread, 0, len(ts))
	for _, t := range ts {
		out = append(out, publicThread(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) thread(w http.ResponseWriter, r *http.Request) *workflow.Thread {
	id := r.PathValue("id")
	t, err := d.store.Thread(id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("unknown thread %q", id), "list threads with 'nerve workflow logs WORKFLOW'")
		return nil
	}
	if err != nil {
		writeErr(w, err)
		return nil
	}
	return t
}

func (d *Daemon) handleThread(w http.ResponseWriter, r *http.Request) {
	if t := d.thread(w, r); t != nil {
		pt := publicThread(t)
		pt.Waiting = d.runner.waitingTurns(t.ID)
		pt.Children = d.childSummary(t.ID)
		writeJSON(w, http.StatusOK, pt)
	}
}

func (d *Daemon) handleCancel(w http.ResponseWriter, r *http.Request) {
	t := d.thread(w, r)
	if t == nil {
		return
	}
	if t.Ended() {
		writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("%s already ended (%s)", t.ID, t.Status), "")
		return
	}
	if !d.runner.cancel(t.ID) {
		// Running on disk but not here (should not happen after resume):
		// end it so it cannot stay running forever.
		d.runner.fail(t, "cancelled by user")
	}
	// Wait briefly for the engine to record the cancellation.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := d.store.Thread(t.ID)
		if err == nil && cur.Ended() {
			writeJSON(w, http.StatusOK, publicThread(cur))
			return
		}
		select {
		case <-d.store.Changed(t.ID):
		case <-time.After(100 * time.Millisecond):
		}
	}
	writeJSON(w, http.StatusAccepted, publicThread(t))
}

func (d *Daemon) handleMessages(w http.ResponseWriter, r *http.Request) {
	t := d.thread(w, r)
	if t == nil {
		return
	}
	f, err := workflow.ParseFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "")
		return
	}
	msgs, err := d.store.Messages(t.ID)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, f.Apply(msgs))
}

func (d *Daemon) handleShutdown(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusAccepted, map[string]any{"pid": os.Getpid()})
	go func() {
		// Deliver SIGTERM to ourselves: one shutdown path for both.
		p, _ := os.FindProcess(os.Getpid())
		_ = p.Signal(terminateSignal)
	}()
}

type usageErr struct{ msg, hint string }

func (e *usageErr) Error() string { return e.msg }

func usage(msg, hint string) error { return &usageErr{msg, hint} }

// writeErr maps an error to the API's status and code.
func writeErr(w http.ResponseWriter, err error) {
	var (
		ue  *usageErr
		nf  *workflow.NotFoundError
		fe  *yamlfile.Error
		fes yamlfile.Errors
		ie  *workflow.InputError
		ac  *store.AnswerConflict
		de  *workflow.DepthError
		ni  *knowledge.NoIndexError
		qe  *knowledge.QueryError
	)
	switch {
	case errors.As(err, &nf):
		writeError(w, http.StatusNotFound, codeNotFound, nf.Error(), nf.Hint())
	case errors.As(err, &ni):
		writeError(w, http.StatusNotFound, codeNotFound, ni.Error(), ni.Hint())
	case errors.As(err, &qe):
		writeError(w, http.StatusBadRequest, codeUsage, qe.Error(), qe.Hint())
	case errors.As(err, &ue):
		writeError(w, http.StatusBadRequest, codeUsage, ue.msg, ue.hint)
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, codeUsage, ie.Error(), ie.Hint())
	case errors.As(err, &fes), errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, codeUsage, err.Error(), "check it with 'nerve validate'")
	case errors.As(err, &ac):
		writeError(w, http.StatusConflict, codeConflict, ac.Reason, "")
	case errors.As(err, &de):
		writeError(w, http.StatusConflict, codeConflict, de.Error(), "a child may be at most max_spawn_depth levels deep (nerve.yaml daemon.max_spawn_depth)")
	case errors.Is(err, errShuttingDown):
		writeError(w, http.StatusServiceUnavailable, codeShutdown, err.Error(), "")
	default:
		writeError(w, http.StatusInternalServerError, codeInternal, err.Error(), "")
	}
}

func writeError(w http.ResponseWriter, status int, code, msg, hint string) {
	var e apiError
	e.Error.Code, e.Error.Message, e.Error.Hint = code, msg, hint
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// absPath is used by clients to send definition files the daemon can read.
func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
