package khala

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	"go.yaml.in/yaml/v3"

	"github.com/nerve-agents/nerve/internal/yamlfile"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/workflow"
)

// workflowJSON is a published definition as the API shows it.
type workflowJSON struct {
	Name        string                    `json:"name"`
	Description string                    `json:"description,omitempty"`
	Binding     string                    `json:"binding"`
	Roles       []string                  `json:"roles"`
	Inputs      map[string]workflow.Input `json:"inputs,omitempty"`
	Limits      limitsJSON                `json:"limits"`
	// Workspace is the definition's {repo, base}; null when it declares
	// none. A thread of it must be given a base commit.
	Workspace *workflow.WorkspaceSpec `json:"workspace"`
	Version   string                  `json:"version"`
	UpdatedAt time.Time               `json:"updated_at"`
	UpdatedBy string                  `json:"updated_by,omitempty"`
	Source    string                  `json:"source,omitempty"`
}

// limitsJSON writes durations as Go duration strings ("10m0s"), which
// time.ParseDuration reads back.
type limitsJSON struct {
	MaxSteps    int    `json:"max_steps"`
	Claim       string `json:"claim"`
	MaxAttempts int    `json:"max_attempts"`
	Idle        string `json:"idle,omitempty"`
}

func newWorkflowJSON(rec khaladb.WorkflowRecord, def *workflow.Definition) workflowJSON {
	l := def.Limits
	limits := limitsJSON{MaxSteps: l.MaxSteps, Claim: l.Claim.D().String(), MaxAttempts: l.MaxAttempts}
	if l.Idle > 0 {
		limits.Idle = l.Idle.D().String()
	}
	roles := make([]string, 0, len(def.Roles))
	for r := range def.Roles {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return workflowJSON{Name: rec.Name, Description: def.Description, Binding: def.Binding, Roles: roles,
		Inputs: def.Inputs, Limits: limits, Workspace: def.Workspace, Version: rec.SourceHash[:12], UpdatedAt: rec.UpdatedAt, UpdatedBy: rec.UpdatedBy}
}

func (s *Server) handleWorkflows(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	recs, err := s.store.Workflows(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]workflowJSON, 0, len(recs))
	for _, rec := range recs {
		def, err := s.engine.Definition(r.Context(), rec.SourceHash)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out = append(out, newWorkflowJSON(rec, def))
	}
	writeJSON(w, http.StatusOK, out)
}

// workflowRecord reads the named workflow and its definition.
func (s *Server) workflowRecord(r *http.Request) (khaladb.WorkflowRecord, *workflow.Definition, error) {
	name := r.PathValue("name")
	rec, err := s.store.Workflow(r.Context(), name)
	if errors.Is(err, khaladb.ErrNotFound) {
		return rec, nil, notFound("unknown workflow %q; publish it with: nerve workflow push %s REMOTE", name, name)
	}
	if err != nil {
		return rec, nil, err
	}
	def, err := s.engine.Definition(r.Context(), rec.SourceHash)
	return rec, def, err
}

func (s *Server) handleWorkflow(w http.ResponseWriter, r *http.Request, _ khaladb.Agent) {
	rec, def, err := s.workflowRecord(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	src, err := s.store.Source(r.Context(), rec.SourceHash)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := newWorkflowJSON(rec, def)
	out.Source = string(src)
	writeJSON(w, http.StatusOK, out)
}

// A publish comes in one of three forms: the definition's fields as a
// JSON object (what a client of a JSON API sends first), {"source": YAML},
// or the YAML itself with a YAML content type. All three are checked by
// the same parser; the stored source is YAML either way.

// readDefinition returns the definition's YAML and whether it came as a
// JSON object of fields: its errors then name fields only, since the
// lines are of a text the client never wrote.
func readDefinition(r *http.Request, name string) ([]byte, bool, error) {
	if strings.Contains(r.Header.Get("Content-Type"), "yaml") {
		b, err := io.ReadAll(r.Body)
		return b, false, err
	}
	var obj map[string]any
	if err := decodeJSON(r, &obj, false); err != nil {
		return nil, false, err
	}
	if src, ok := obj["source"]; ok {
		if len(obj) > 1 {
			return nil, false, badRequest("send the definition as {\"source\": YAML} or as its fields, not both")
		}
		text, ok := src.(string)
		if !ok {
			return nil, false, badRequest("source: want the definition's YAML as a string")
		}
		return []byte(text), false, nil
	}
	if len(obj) == 0 {
		return nil, true, nil
	}
	// The path names the workflow, and Khala hosts cloud workflows: a
	// client need not say either again.
	if _, ok := obj["workflow"]; !ok {
		obj["workflow"] = name
	}
	if _, ok := obj["binding"]; !ok {
		obj["binding"] = workflow.BindingCloud
	}
	src, err := yaml.Marshal(integers(obj))
	if err != nil {
		return nil, true, badRequest("the definition's fields: %v", err)
	}
	return src, true, nil
}

// integers turns JSON's whole numbers back into integers, so that YAML
// writes max_tokens: 3000000 rather than 3e+06.
func integers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = integers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = integers(x)
		}
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	}
	return v
}

// definitionError words a definition's problems for the response: every
// one of them, each naming its field; with the line too when the client
// sent the YAML.
func definitionError(err error, fields bool) error {
	var list yamlfile.Errors
	var one *yamlfile.Error
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = yamlfile.Errors{one}
	}
	if len(list) == 0 {
		return &apiError{http.StatusBadRequest, codeInvalidWF, oneLine(err.Error())}
	}
	msgs := make([]string, 0, len(list))
	for _, e := range list {
		switch {
		case !fields:
			msgs = append(msgs, oneLine(e.Error()))
		case e.Field != "":
			msgs = append(msgs, e.Field+": "+oneLine(e.Msg))
		default:
			msgs = append(msgs, oneLine(e.Msg))
		}
	}
	return &apiError{http.StatusBadRequest, codeInvalidWF, strings.Join(msgs, "; ")}
}

func oneLine(s string) string {
	return strings.Join(strings.Split(strings.TrimSpace(s), "\n"), "; ")
}

func (s *Server) handlePutWorkflow(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	name := r.PathValue("name")
	src, fields, err := readDefinition(r, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(strings.TrimSpace(string(src))) == 0 {
		s.fail(w, r, badRequest("no definition: send its fields as a JSON object, {\"source\": YAML}, or the YAML itself as application/yaml"))
		return
	}
	def, err := workflow.ParseSource(name+".yaml", src)
	if err != nil {
		s.fail(w, r, definitionError(err, fields))
		return
	}
	if def.Name != name {
		s.fail(w, r, &apiError{http.StatusBadRequest, codeInvalidWF,
			fmt.Sprintf("the definition is workflow %q but was sent to /v1/workflows/%s", def.Name, name)})
		return
	}
	rec := khaladb.WorkflowRecord{Name: name, SourceHash: engine.SourceHash(src), UpdatedAt: s.now(), UpdatedBy: a.Name}
	if c := callerOf(r); !c.overrides(ScopePublish) {
		rec.Owner = c.name // the storage refuses another's, atomically
	}
	created, err := s.store.PutWorkflow(r.Context(), rec, src)
	if errors.Is(err, khaladb.ErrNotOwner) {
		old, _ := s.store.Workflow(r.Context(), name)
		err = notYours("workflow "+name, old.OwnedBy())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.engine.Remember(rec.SourceHash, def)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.log.Info("workflow published", "workflow", name, "version", rec.SourceHash[:12], "agent", a.Name)
	writeJSON(w, status, newWorkflowJSON(rec, def))
}

type startRequest struct {
	Input     map[string]any  `json:"input"`
	Webhook   string          `json:"webhook"`
	Workspace json.RawMessage `json:"workspace"` // api.StartWorkspace, checked by startWorkspace
	// Parent makes the thread a child of a running thread (an agent
	// inside a turn of it started this one).
	Parent *api.StartParent `json:"parent"`
	// Priority orders the thread's turns in the queue (api.MinPriority
	// to api.MaxPriority; default 0).
	Priority *int `json:"priority"`
}

// startResponse is 201's body: the thread's status after its first
// routing (a moderator may end a thread at once).
type startResponse struct {
	Thread   string `json:"thread"`
	Workflow string `json:"workflow"`
	Status   string `json:"status"`
	Result   any    `json:"result,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (s *Server) handleStartThread(w http.ResponseWriter, r *http.Request, a khaladb.Agent) {
	var req startRequest
	if err := decodeJSON(r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	rec, def, err := s.workflowRecord(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	input, err := def.CheckInputs(req.Input)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkWebhook(r.Context(), req.Webhook); err != nil {
		s.fail(w, r, err)
		return
	}
	ws, taken, err := startWorkspace(def, req.Workspace)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Parent != nil && !workflow.IsThreadID(req.Parent.Thread) {
		s.fail(w, r, badRequest("parent.thread %q: want a thread id such as thread-7", req.Parent.Thread))
		return
	}
	if err := api.CheckPriority(req.Priority); err != nil {
		s.fail(w, r, badRequest("%v", err))
		return
	}
	by := callerOf(r)
	th, err := s.engine.Start(r.Context(), engine.StartRequest{Workflow: rec, Def: def, Input: input, Workspace: ws, Taken: taken,
		Webhook: req.Webhook, Initiator: a.Name, Parent: req.Parent, Priority: req.Priority,
		MayAttach: func(v *khaladb.ThreadView) error {
			if !mayAttach(v, by) {
				return notYours("thread "+v.Thread.ID, v.Thread.Initiator)
			}
			return nil
		}})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, startResponse{Thread: th.ID, Workflow: th.Workflow, Status: th.Status, Result: th.Result, Error: th.Error})
}

// checkWebhook accepts an absolute http(s) URL to a destination the
// operator allows (webhook_policy.go), or none.
func (s *Server) checkWebhook(ctx context.Context, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > 2048 {
		return badRequest("webhook %q: want an absolute http or https URL", raw)
	}
	if why := s.opts.WebhookAllow.checkTarget(ctx, u); why != "" {
		return badRequest("webhook %s: refused, %s; the server's operator may allow it with 'nerve khala serve --webhook-allow'", u.Host, why)
	}
	return nil
}
