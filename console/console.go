package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configure a Console.
type Options struct {
	Source Source
	// Auth checks a person's token at sign-in; nil lets no token in (the
	// sign-in page says how people get one: SignInHelp).
	Auth Authenticator
	// Title names what the console shows ("Khala", "laptop-1").
	Title string
	// Recheck runs on every signed-in request; nil: a session lasts until
	// it expires or its person signs out.
	Recheck Recheck
	// SignInHelp is shown on the sign-in page: where a token comes from.
	SignInHelp string
	// SessionTTL is how long a sign-in lasts. Default 12h.
	SessionTTL time.Duration
	// PerPage is the threads list's page size. Default 50.
	PerPage int
	Logger  *slog.Logger
	Now     func() time.Time
}

// Console is the web console's HTTP handler.
type Console struct {
	opts     Options
	src      Source
	sessions *sessions
	log      *slog.Logger
	mux      *http.ServeMux

	onceMu sync.Mutex
	once   map[string]string // one-time sign-in code → person
}

// New returns a console over o.Source.
func New(o Options) *Console {
	pages() // parsed now, so the first page served does not wait for it
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.PerPage <= 0 {
		o.PerPage = 50
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Title == "" {
		o.Title = "nerve"
	}
	c := &Console{opts: o, src: o.Source, sessions: newSessions(o.SessionTTL, o.Now), log: o.Logger,
		once: map[string]string{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /static/{file}", serveStatic)
	m.HandleFunc("GET /signin", c.handleSignInPage)
	m.HandleFunc("POST /signin", c.handleSignIn)
	m.HandleFunc("GET /signin/once", c.handleOncePage)
	m.HandleFunc("POST /signin/once", c.handleOnce)
	m.HandleFunc("POST /signout", c.handleSignOut)
	m.HandleFunc("GET /{$}", c.page(c.threadsPage))
	m.HandleFunc("GET /threads/{id}", c.page(c.threadPage))
	m.HandleFunc("GET /threads/{id}/live", c.signedIn(c.handleLive))
	m.HandleFunc("GET /counts/live", c.signedIn(c.handleLiveCounts))
	m.HandleFunc("GET /inbox", c.page(c.inboxPage))
	m.HandleFunc("POST /inbox/answer", c.signedIn(c.handleAnswer))
	m.HandleFunc("GET /workflows", c.page(c.workflowsPage))
	m.HandleFunc("GET /workflows/{name}", c.page(c.workflowPage))
	m.HandleFunc("GET /agents", c.page(c.agentsPage))
	m.HandleFunc("GET /queue", c.page(c.queuePage))
	m.HandleFunc("GET /usage", c.page(c.usagePage))
	m.HandleFunc("/", c.handleNotFound)
	c.mux = m
	return c
}

// csp allows the console's own files and nothing inline.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" would make Origin "null" on our own forms
	h.Set("X-Frame-Options", "DENY")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// OneTimeSignIn returns the path of a link that signs person in once:
// `nerve console` prints it. Its page's button posts the code, which is
// spent then, so the URL is worthless once its person has signed in.
func (c *Console) OneTimeSignIn(person string) string {
	code := randomToken()
	c.onceMu.Lock()
	c.once[code] = person
	c.onceMu.Unlock()
	return "/signin/once?code=" + code
}

// user is who a page is for.
type user struct {
	Person string
	CSRF   string
}

// signedIn runs h for a signed-in person; others go to the sign-in page
// (or get 401 for what is not a page).
func (c *Console) signedIn(h func(w http.ResponseWriter, r *http.Request, u user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, se := c.session(r)
		if se == nil {
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/live") {
				http.Redirect(w, r, "/signin", http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		if c.opts.Recheck != nil {
			if err := c.opts.Recheck(r.Context(), se.person, se.since); errors.Is(err, ErrSessionEnded) {
				c.endSession(w, r, se, err)
				return
			} else if err != nil {
				c.log.Error("console session check failed", "person", se.person, "err", err)
				http.Error(w, "could not check your session; retry shortly", http.StatusServiceUnavailable)
				return
			}
		}
		u := user{Person: se.person, CSRF: se.csrf}
		if r.Method == http.MethodPost {
			if err := checkOrigin(r); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			if !sameToken(r.PostFormValue("csrf"), se.csrf) {
				http.Error(w, "refused: the form's CSRF token is missing or stale; reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r, u)
	}
}

// view is what a page handler returns: the template and its data.
type view struct {
	name  string // template
	title string
	nav   string
	data  any
	// notYet says what the page will show once its feature lands.
	notYet bool
}

func (c *Console) page(fn func(r *http.Request, u user) (view, error)) http.HandlerFunc {
	return c.signedIn(func(w http.ResponseWriter, r *http.Request, u user) {
		v, err := fn(r, u)
		switch {
		case errors.Is(err, ErrNotAvailable) && v.name == "":
			c.renderError(w, u, http.StatusNotImplemented, "this page is not available here yet")
			return
		case errors.Is(err, ErrNotAvailable):
			v.notYet, err = true, nil
		case errors.Is(err, ErrNotFound):
			c.renderError(w, u, http.StatusNotFound, err.Error())
			return
		case errors.Is(err, errBadRequest):
			c.renderError(w, u, http.StatusBadRequest, err.Error())
			return
		case errors.Is(err, context.Canceled):
			return
		case err != nil:
			c.log.Error("console page failed", "path", r.URL.Path, "err", err)
			c.renderError(w, u, http.StatusInternalServerError, "could not read this page: "+err.Error())
			return
		}
		c.render(w, r, http.StatusOK, v, u)
	})
}

var errBadRequest = errors.New("bad request")

var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render writes a whole page, or nothing but an error: a template that
// fails half way does not send half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, v view, u user) {
	buf := bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufs.Put(buf)
	p := pageData{Title: v.title, Site: c.opts.Title, Nav: v.nav, User: u, Data: v.data, NotYet: v.notYet}
	if err := pages()[v.name].ExecuteTemplate(buf, "layout", p); err != nil {
		c.log.Error("console template failed", "template", v.name, "err", err)
		http.Error(w, "internal error rendering the page; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	writeBody(w, r, status, buf.Bytes())
}

// gzipFrom is the size past which a page is sent compressed to a browser
// that takes gzip: a long thread's page shrinks about tenfold.
const gzipFrom = 16 << 10

var gzips = sync.Pool{New: func() any { z, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed); return z }}

func writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Add("Vary", "Accept-Encoding")
	if len(body) < gzipFrom || r == nil || !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.WriteHeader(status)
	z := gzips.Get().(*gzip.Writer)
	defer gzips.Put(z)
	z.Reset(w)
	_, _ = z.Write(body)
	_ = z.Close()
}

// handleNotFound is the console's own page for a path it has none at,
// with the navigation when its reader is signed in.
func (c *Console) handleNotFound(w http.ResponseWriter, r *http.Request) {
	var u user
	if _, se := c.session(r); se != nil {
		u = user{Person: se.person, CSRF: se.csrf}
	}
	c.renderError(w, u, http.StatusNotFound, "there is no page at "+r.URL.Path)
}

func (c *Console) renderError(w http.ResponseWriter, u user, status int, msg string) {
	c.render(w, nil, status, view{name: "error", title: http.StatusText(status), data: msg}, u)
}

// pageData is what the layout sees.
type pageData struct {
	Title, Site, Nav string
	User             user
	Data             any
	NotYet           bool
}
