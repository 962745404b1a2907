package khala

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Token scopes (DESIGN.md, "Sandbox and authorization"): what a token
// may do. An agent's: claim (claim, heartbeat, answer, release and report
// on the turns it serves), start (start threads of published workflows)
// and publish (its own workflows). A person's: answer (human turns and
// the inbox), cancel (anyone's thread) and console (sign in). The admin
// token, on the admin path from loopback, may do everything. Every token
// reads threads and workflows.
const (
	ScopeClaim   = "claim"
	ScopeStart   = "start"
	ScopePublish = "publish"
	ScopeAnswer  = "answer"
	ScopeCancel  = "cancel"
	ScopeConsole = "console"
)

// AgentScopes and PersonScopes are what each kind of token may carry;
// the defaults are what each could do before scopes, less acting on what
// others published and started.
var (
	AgentScopes          = []string{ScopeClaim, ScopeStart, ScopePublish}
	PersonScopes         = []string{ScopeAnswer, ScopeCancel, ScopeConsole}
	DefaultAgentScopes   = AgentScopes
	DefaultPersonScopes  = []string{ScopeAnswer, ScopeConsole}
	legacyPersonScopes   = DefaultPersonScopes
	legacyScopesDescribe = "legacy (claim,start,publish, and others' workflows and threads)"
)

// ParseScopes reads a comma-separated list of the scopes in allowed:
// sorted as allowed lists them, no duplicates. Empty: want.
func ParseScopes(list string, allowed []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(allowed, s) {
			return nil, fmt.Errorf("scope %q: want some of %s", s, strings.Join(allowed, ","))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scope: want some of %s", strings.Join(allowed, ","))
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(allowed, a) - slices.Index(allowed, b) })
	return out, nil
}

// DescribeScopes words a token's stored scopes for lists: none is a
// token issued before scopes, which keeps what it could do.
func DescribeScopes(scopes []string, person bool) string {
	switch {
	case len(scopes) > 0:
		return strings.Join(scopes, ",")
	case person:
		return "legacy (" + strings.Join(legacyPersonScopes, ",") + ")"
	}
	return legacyScopesDescribe
}

// adminName is who the admin token acts as in records (a workflow's
// owner, a thread's initiator); no agent may enroll under it.
const adminName = "admin"

// Caller kinds.
const (
	callerAgent = iota + 1
	callerPerson
	callerAdmin
)

// caller is who made a request, as authenticate found them.
type caller struct {
	kind   int
	name   string
	scopes []string // stored; none: the legacy set
}

type callerKey struct{}

func withCaller(r *http.Request, c caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// callerOf is the request's caller (zero for unauthenticated routes).
func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// legacy reports an agent token issued before scopes: it keeps every
// right agents had, others' workflows and threads included, until it is
// revoked and enrolled again.
func (c caller) legacy() bool { return c.kind == callerAgent && len(c.scopes) == 0 }

// has reports whether c may use scope.
func (c caller) has(scope string) bool {
	switch {
	case scope == "" || c.kind == callerAdmin:
		return true
	case c.kind == callerPerson && len(c.scopes) == 0:
		return slices.Contains(legacyPersonScopes, scope)
	case c.legacy():
		return slices.Contains(AgentScopes, scope)
	}
	return slices.Contains(c.scopes, scope)
}

// overrides reports whether c may act on what someone else published or
// started: the admin, a person who may cancel (for cancelling), and
// legacy agent tokens.
func (c caller) overrides(scope string) bool {
	return c.kind == callerAdmin || c.legacy() || (c.kind == callerPerson && scope == ScopeCancel && c.has(ScopeCancel))
}

// needScope refuses c a route needing scope, naming what it lacks.
func needScope(c caller, scope string) error {
	if c.has(scope) {
		return nil
	}
	what := "agent " + c.name
	if c.kind == callerPerson {
		what = "person " + c.name
	}
	return forbidden("%s's token lacks the %s scope (it has %s); issue one that has it (nerve khala enroll-token --scope, nerve khala user add --scope)",
		what, scope, DescribeScopes(c.scopes, c.kind == callerPerson))
}

// notYours refuses acting on what another agent published or started.
func notYours(what, owner string) error {
	return forbidden("%s is %s's: only its owner, a person with that right or the admin may do that", what, owner)
}

// scopesOf is what a new token is issued with: the defaults when none
// were asked for.
func scopesOf(asked, defaults []string) []string {
	if len(asked) == 0 {
		return slices.Clone(defaults)
	}
	return asked
}

// agentScopesCheck checks scopes sent to the admin path.
func agentScopesCheck(scopes []string, allowed []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	out, err := ParseScopes(strings.Join(scopes, ","), allowed)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return out, nil
}

// mayAttach reports whether by may start a child under v's thread: the
// agent that started it, an agent serving one of its turns (a child
// started from inside the turn), a legacy token or the admin.
func mayAttach(v *khaladb.ThreadView, by caller) bool {
	if by.overrides(ScopeStart) || (by.kind == callerAgent && by.name == v.Thread.Initiator) {
		return true
	}
	return by.kind == callerAgent && slices.ContainsFunc(v.Turns, func(t khaladb.Turn) bool {
		return t.State == khaladb.TurnClaimed && t.Agent == by.name
	})
}
