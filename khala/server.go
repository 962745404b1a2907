package khala

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nerve-agents/nerve/internal/telemetry"
	"github.com/nerve-agents/nerve/khala/engine"
	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	Store   khaladb.Storage
	Version string
	Logger  *slog.Logger

	// MaxBody bounds a request body (413 past it). Default 4 MiB.
	MaxBody int64
	// RequestTimeout bounds a request's work, long polls and event
	// streams aside. Default 30s.
	RequestTimeout time.Duration
	// MaxWait caps a claim's long poll. Default 60s.
	MaxWait time.Duration
	// Recheck is how often waiters look again without a wake-up hint:
	// hints may be lost on a shared database. Default 5s.
	Recheck time.Duration
	// MaxSpawnDepth bounds how deep child threads nest (0:
	// workflow.DefaultMaxSpawnDepth).
	MaxSpawnDepth int
	// AdminToken, when set, enables the local admin path (issuing
	// enrollment tokens while the server holds the database).
	AdminToken khaladb.Hash

	// WebhookAllow widens where webhooks may go (webhook_policy.go):
	// by default not loopback, link-local or this machine's addresses.
	WebhookAllow WebhookAllow
	// WebhookTimeout bounds one delivery, from dial to the response's
	// headers. Default 5s.
	WebhookTimeout time.Duration
	// WebhookBackoff is the wait before retry n (1-based). Default: 1s
	// doubling, capped at 5m.
	WebhookBackoff func(n int) time.Duration
	// WebhookAttempts is how many deliveries are tried before giving up.
	// Default 12 (about half an hour with the default backoff).
	WebhookAttempts int

	Now func() time.Time

	// PersonAuth checks people's tokens at the web console's sign-in;
	// nil: this server's people (PersonByToken, `nerve khala user add`).
	// Another must answer names of the store's people: every console
	// request checks its person is still there (recheck).
	PersonAuth PersonAuth
}

// Server is the Khala HTTP API over a Storage.
type Server struct {
	opts    Options
	store   khaladb.Storage
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time

	closing   chan struct{} // closed when shutdown begins: long polls end
	closeOnce sync.Once
	engine    *engine.Engine // every transition of a thread; the handlers are its HTTP shell
	seen      lastSeen       // when agents last made requests here (seen.go)
	webhooks  *http.Client
}

// New returns a Server; call Run for its background work.
func New(o Options) *Server {
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 60 * time.Second
	}
	if o.Recheck <= 0 {
		o.Recheck = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.WebhookTimeout <= 0 {
		o.WebhookTimeout = webhookResponseTimeout
	}
	if o.WebhookBackoff == nil {
		o.WebhookBackoff = func(n int) time.Duration { return min(time.Second<<min(n-1, 20), 5*time.Minute) }
	}
	if o.WebhookAttempts <= 0 {
		o.WebhookAttempts = 12
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{opts: o, store: o.Store, log: o.Logger, metrics: newMetrics(),
		now: func() time.Time { return o.Now().UTC() }, closing: make(chan struct{})}
	s.engine = engine.New(engine.Config{Store: o.Store, Now: s.now, MaxSpawnDepth: o.MaxSpawnDepth, Recheck: o.Recheck,
		FollowUpTimeout: o.RequestTimeout, Logger: o.Logger, Observer: s.metrics})
	s.webhooks = newWebhookClient(o.WebhookAllow, o.WebhookTimeout)
	if s.opts.PersonAuth == nil {
		s.opts.PersonAuth = s.PersonByToken
	}
	return s
}

// Run does the background work (lease expiry, idle detection, webhook
// delivery, recording when agents were last seen) until ctx ends.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.engine.Run(ctx) }()
	go func() { defer wg.Done(); s.runWebhooks(ctx) }()
	go func() { defer wg.Done(); s.runSeen(ctx) }()
	wg.Wait()
}

// BeginShutdown ends long polls and event streams at once, so a graceful
// HTTP shutdown need not wait for them.
func (s *Server) BeginShutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

// Auth kinds of a route.
const (
	authNone   = iota
	authAgent  // an agent token
	authEnroll // an enrollment token
	authAdmin  // the local admin token, from loopback only
	authPerson // a person's token (answering human turns)
	authRead   // an agent's token or a person's (reading threads)
	authFleet  // an agent's token, or the local admin token (the fleet's state)
	authCancel // an agent's token, a person's, or the local admin token
)

type handlerFunc func(w http.ResponseWriter, r *http.Request, a khaladb.Agent)

type route struct {
	method string
	auth   int
	h      handlerFunc
	// scope is what the caller's token must carry (scopes.go).
	scope string
	// stream routes (long poll, SSE) set their own time limits.
	stream bool
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	add := func(pattern string, routes ...route) {
		mux.Handle(pattern, s.dispatch(routes))
	}
	add("/v1/health", route{method: "GET", h: s.handleHealth})
	add("/v1/agents",
		route{method: "GET", auth: authFleet, h: s.handleAgents},
		route{method: "POST", auth: authEnroll, h: s.handleEnroll})
	add("/v1/agents/me", route{method: "GET", auth: authAgent, h: s.handleMe})
	add("/v1/admin/enroll-tokens", route{method: "POST", auth: authAdmin, h: s.handleAdminEnrollToken})
	add("/v1/workflows", route{method: "GET", auth: authRead, h: s.handleWorkflows})
	add("/v1/workflows/{name}",
		route{method: "GET", auth: authRead, h: s.handleWorkflow},
		route{method: "PUT", auth: authFleet, scope: ScopePublish, h: s.handlePutWorkflow})
	add("/v1/workflows/{name}/threads", route{method: "POST", auth: authFleet, scope: ScopeStart, h: s.handleStartThread})
	add("/v1/threads", route{method: "GET", auth: authRead, h: s.handleThreads})
	add("/v1/threads/{id}", route{method: "GET", auth: authRead, h: s.handleThread})
	add("/v1/threads/{id}/cancel", route{method: "POST", auth: authCancel, h: s.handleCancel})
	add("/v1/threads/{id}/messages", route{method: "GET", auth: authRead, h: s.handleMessages})
	add("/v1/threads/{id}/trace", route{method: "GET", auth: authRead, h: s.handleTrace})
	add("/v1/threads/{id}/events", route{method: "GET", auth: authRead, h: s.handleEvents, stream: true})
	add("/v1/turns/claim", route{method: "POST", auth: authAgent, scope: ScopeClaim, h: s.handleClaim, stream: true})
	add("/v1/turns/{turn}/heartbeat", route{method: "POST", auth: authAgent, scope: ScopeClaim, h: s.handleHeartbeat})
	add("/v1/turns/{turn}/response", route{method: "POST", auth: authAgent, scope: ScopeClaim, h: s.handleResponse})
	add("/v1/turns/{turn}/release", route{method: "POST", auth: authAgent, scope: ScopeClaim, h: s.handleRelease})
	add("/v1/turns/{turn}/events", route{method: "POST", auth: authAgent, scope: ScopeClaim, h: s.handleTurnEvents})
	add("/v1/threads/{id}/turns/{turn}/answer", route{method: "POST", auth: authPerson, scope: ScopeAnswer, h: s.handleAnswer})
	add("/v1/inbox", route{method: "GET", auth: authPerson, scope: ScopeAnswer, h: s.handleInbox})
	add("/v1/notices", route{method: "GET", auth: authPerson, scope: ScopeAnswer, h: s.handleNotices})
	add("/v1/admin/users",
		route{method: "GET", auth: authAdmin, h: s.handleAdminUsers},
		route{method: "POST", auth: authAdmin, h: s.handleAdminAddUser})
	add("/v1/admin/users/{name}", route{method: "DELETE", auth: authAdmin, h: s.handleAdminRemoveUser})
	add("/v1/admin/agents/{name}", route{method: "DELETE", auth: authAdmin, h: s.handleAdminRevokeAgent})
	add("/v1/usage", route{method: "GET", auth: authAgent, h: s.handleUsage})
	add("/metrics", route{method: "GET", auth: authAgent, h: s.handleMetrics})
	mux.Handle("/", s.consoleHandler(s.opts.PersonAuth))
	return telemetry.Handler("khala", s.middleware(mux))
}

func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &telemetry.StatusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", p)
				if sw.Status == 0 {
					writeError(sw, http.StatusInternalServerError, codeInternal, "internal error; see the server log")
				}
			}
			s.metrics.request(sw.Status)
		}()
		sw.Header().Set("X-Khala-Version", s.opts.Version)
		sw.Header().Set("Cache-Control", "no-store")
		r.Body = http.MaxBytesReader(sw, r.Body, s.opts.MaxBody)
		next.ServeHTTP(sw, r)
	})
}

// dispatch picks the route by method, checks its credentials and bounds
// its time.
func (s *Server) dispatch(routes []route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := slices.IndexFunc(routes, func(rt route) bool { return rt.method == r.Method })
		if i < 0 {
			var allow []string
			for _, rt := range routes {
				allow = append(allow, rt.method)
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, codeMethod, fmt.Sprintf("%s %s is not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		rt := routes[i]
		// The server has no ReadTimeout (it would cancel long polls):
		// each request gets a deadline for its body instead, which stream
		// routes lift once they have read it.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.opts.RequestTimeout))
		if !rt.stream {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
			_ = rc.SetWriteDeadline(time.Now().Add(s.opts.RequestTimeout + 5*time.Second))
		}
		a, c, err := s.authenticate(r, rt.auth)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="khala"`)
			s.fail(w, r, err)
			return
		}
		if err := needScope(c, rt.scope); err != nil {
			s.fail(w, r, err)
			return
		}
		rt.h(w, withCaller(r, c), a)
	})
}

// authenticate checks the bearer token against what the route needs, and
// says who the caller is. The reasons never repeat the token.
func (s *Server) authenticate(r *http.Request, kind int) (khaladb.Agent, caller, error) {
	if kind == authNone {
		return khaladb.Agent{}, caller{}, nil
	}
	tok := bearer(r)
	if tok == "" {
		return khaladb.Agent{}, caller{}, fmt.Errorf("%w: missing Authorization: Bearer token", khaladb.ErrUnauthorized)
	}
	h := hashToken(tok)
	if kind == authFleet || kind == authCancel {
		if strings.HasPrefix(tok, prefixAdmin) {
			kind = authAdmin
		} else if kind == authFleet {
			kind = authAgent
		}
	}
	switch kind {
	case authAdmin:
		if s.opts.AdminToken == (khaladb.Hash{}) || !khaladb.SameHash(h, s.opts.AdminToken) || !fromLoopback(r) {
			return khaladb.Agent{}, caller{}, fmt.Errorf("%w: the admin path takes the server's local admin token, from this machine", khaladb.ErrUnauthorized)
		}
		return khaladb.Agent{Name: adminName}, caller{kind: callerAdmin, name: adminName}, nil
	case authEnroll:
		// Checked (and consumed) by Enroll itself, in one transaction.
		if !strings.HasPrefix(tok, prefixEnroll) {
			return khaladb.Agent{}, caller{}, fmt.Errorf("%w: enrolling takes an enrollment token (nerve khala enroll-token)", khaladb.ErrUnauthorized)
		}
		return khaladb.Agent{Token: h}, caller{}, nil
	}
	if kind == authPerson || strings.HasPrefix(tok, prefixPerson) {
		a, err := s.authPerson(r.Context(), h, kind)
		return a, caller{kind: callerPerson, name: a.Name, scopes: a.Scopes}, err
	}
	a, err := s.store.AgentByToken(r.Context(), h)
	if errors.Is(err, khaladb.ErrUnauthorized) {
		msg := "unknown agent token (was the agent revoked?)"
		if strings.HasPrefix(tok, prefixEnroll) {
			msg = "this is an enrollment token; enroll with it (POST /v1/agents) and use the agent token you get"
		}
		return khaladb.Agent{}, caller{}, fmt.Errorf("%w: %s", khaladb.ErrUnauthorized, msg)
	}
	if err == nil {
		s.seen.saw(a.Name, s.now())
	}
	return a, caller{kind: callerAgent, name: a.Name, scopes: a.Scopes}, err
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
