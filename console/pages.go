package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/nerve-agents/nerve/workflow"
)

// threadsData is the threads list's.
type threadsData struct {
	Filter    ThreadFilter
	Page      *ThreadPage
	Workflows []string
	Statuses  []string
	Prev      string // link to the previous page, "" on the first
	Next      string
}

func (c *Console) threadsPage(r *http.Request, _ user) (view, error) {
	q := r.URL.Query()
	f := ThreadFilter{Workflow: q.Get("workflow"), Status: q.Get("status"), Page: 1, PerPage: c.opts.PerPage}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return view{}, fmt.Errorf("%w: status %q: want one of running, waiting, completed, failed, cancelled", errBadRequest, f.Status)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return view{}, fmt.Errorf("%w: page %q: want a page number from 1", errBadRequest, v)
		}
		f.Page = n
	}
	p, err := c.src.Threads(r.Context(), f)
	if err != nil {
		return view{}, err
	}
	// The filter offers every workflow with threads, and the definitions
	// that have none yet.
	d := threadsData{Filter: f, Page: p, Statuses: Statuses, Workflows: slices.Clone(p.Workflows)}
	if wfs, err := c.src.Workflows(r.Context()); err == nil {
		for _, w := range wfs {
			d.Workflows = append(d.Workflows, w.Name)
		}
	}
	slices.Sort(d.Workflows)
	d.Workflows = slices.Compact(d.Workflows)
	link := func(page int) string {
		v := url.Values{}
		if f.Workflow != "" {
			v.Set("workflow", f.Workflow)
		}
		if f.Status != "" {
			v.Set("status", f.Status)
		}
		if page > 1 {
			v.Set("page", strconv.Itoa(page))
		}
		if len(v) == 0 {
			return "/"
		}
		return "/?" + v.Encode()
	}
	if f.Page > 1 {
		d.Prev = link(f.Page - 1)
	}
	if p.More {
		d.Next = link(f.Page + 1)
	}
	return view{name: "threads", title: "Threads", nav: "threads", data: d}, nil
}

// threadData is a thread's page's.
type threadData struct {
	*ThreadDetail
	Detections []workflow.Event
	LastSeq    uint64
	Live       bool
	// ChildrenUnknown: the source cannot list child threads yet.
	ChildrenUnknown bool
	// Changed sums what the turns committed; Commits counts them.
	Changed workflow.Changes
	Commits int
	// ChildCounts are the children by status, in Statuses' order.
	ChildCounts []statusCount
	// ParentID links to the parent when it is on this server.
	ParentID string
	// Form is an answer to one of Waiting that failed.
	inboxData
}

type statusCount struct {
	Status string
	N      int
}

func (c *Console) threadPage(r *http.Request, u user) (view, error) {
	id := r.PathValue("id")
	if !workflow.IsThreadID(id) {
		return view{}, fmt.Errorf("%w: %q is not a thread id (thread-N)", errBadRequest, id)
	}
	t, err := c.src.Thread(r.Context(), id)
	if err != nil {
		return view{}, err
	}
	d := threadData{ThreadDetail: t, Live: !t.Thread.Ended(), ChildrenUnknown: t.Children == nil}
	d.Person = u.Person
	for _, st := range Statuses {
		n := 0
		for _, ch := range t.Children {
			if ch.Status == st {
				n++
			}
		}
		if n > 0 {
			d.ChildCounts = append(d.ChildCounts, statusCount{st, n})
		}
	}
	if p := t.Thread.Parent; p != nil && !strings.Contains(p.Ref, "/") {
		d.ParentID = p.Thread
	}
	for _, m := range t.Messages {
		if m.Changes != nil {
			d.Changed.Files += m.Changes.Files
			d.Changed.Insertions += m.Changes.Insertions
			d.Changed.Deletions += m.Changes.Deletions
		}
		if m.Commit != "" {
			d.Commits++
		}
	}
	for _, e := range t.Events {
		d.LastSeq = max(d.LastSeq, e.Seq)
		if e.Type == workflow.EventDetection {
			d.Detections = append(d.Detections, e)
		}
	}
	return view{name: "thread", title: t.Thread.ID + " · " + t.Thread.Workflow, nav: "threads", data: d}, nil
}

// inboxData is the inbox's.
type inboxData struct {
	Person string
	Items  []InboxItem
	// Form is an answer that failed, shown again with its error.
	Form  AnswerForm
	Field string
	Error string
	Done  string // the thread just answered
}

func (c *Console) inboxPage(r *http.Request, u user) (view, error) {
	items, err := c.src.Inbox(r.Context(), u.Person)
	d := inboxData{Person: u.Person, Items: items, Done: r.URL.Query().Get("answered")}
	return view{name: "inbox", title: "Inbox", nav: "inbox", data: d}, err
}

func (c *Console) handleAnswer(w http.ResponseWriter, r *http.Request, u user) {
	a := AnswerForm{Thread: r.PostFormValue("thread"), Content: r.PostFormValue("content"), Meta: r.PostFormValue("meta")}
	step, serr := strconv.Atoi(r.PostFormValue("step"))
	a.Step = step
	var err error
	switch {
	case !workflow.IsThreadID(a.Thread) || serr != nil || step < 1:
		err = &FieldError{Field: "thread", Message: "the form names no waiting turn; reload the inbox"}
	default:
		err = c.src.Answer(r.Context(), u.Person, a)
	}
	if err == nil {
		if r.PostFormValue("from") == "thread" {
			http.Redirect(w, r, "/threads/"+url.PathEscape(a.Thread), http.StatusSeeOther)
			return
		}
		http.Redirect(w, r, "/inbox?answered="+url.QueryEscape(a.Thread), http.StatusSeeOther)
		return
	}
	items, ierr := c.src.Inbox(r.Context(), u.Person)
	d := inboxData{Person: u.Person, Items: items, Form: a, Error: err.Error()}
	if fe, ok := err.(*FieldError); ok {
		d.Field, d.Error = fe.Field, fe.Message
	}
	if !slices.ContainsFunc(items, func(i InboxItem) bool { return i.Notice == "" && i.Thread == a.Thread && i.Step == a.Step }) {
		// The turn is gone from the inbox (answered, ended): the error
		// goes above the list, there is no form to put it beside.
		d.Field = "thread"
	}
	status := http.StatusBadRequest
	if ierr != nil {
		status = http.StatusInternalServerError
	}
	c.render(w, r, status, view{name: "inbox", title: "Inbox", nav: "inbox", data: d, notYet: ierr != nil}, u)
}

func (c *Console) workflowsPage(r *http.Request, _ user) (view, error) {
	wfs, err := c.src.Workflows(r.Context())
	return view{name: "workflows", title: "Workflows", nav: "workflows", data: wfs}, err
}

func (c *Console) workflowPage(r *http.Request, _ user) (view, error) {
	name := r.PathValue("name")
	wfs, err := c.src.Workflows(r.Context())
	if err != nil {
		return view{}, err
	}
	i := slices.IndexFunc(wfs, func(w Workflow) bool { return w.Name == name })
	if i < 0 {
		return view{}, fmt.Errorf("%w: no workflow %q", ErrNotFound, name)
	}
	return view{name: "workflow", title: name, nav: "workflows", data: wfs[i]}, nil
}

func (c *Console) agentsPage(r *http.Request, _ user) (view, error) {
	as, err := c.src.Agents(r.Context())
	return view{name: "agents", title: "Agents", nav: "agents", data: as}, err
}

func (c *Console) queuePage(r *http.Request, _ user) (view, error) {
	q, err := c.src.Queue(r.Context())
	return view{name: "queue", title: "Queue", nav: "queue", data: q}, err
}
