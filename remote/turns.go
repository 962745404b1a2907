package remote

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// Claim long-polls the queue. The request's own timeout is the wait plus
// the client's timeout, so a long poll is not cut short.
func (c *Client) Claim(ctx context.Context, req api.ClaimRequest, wait time.Duration) ([]api.Turn, error) {
	req.Wait = api.Wait(wait)
	cc := *c
	cc.Timeout = c.Timeout + wait
	cc.Retries = 0 // the claim loop has its own backoff
	var out []api.Turn
	err := cc.Do(ctx, http.MethodPost, "/v1/turns/claim", req, &out)
	return out, err
}

// Heartbeat extends a lease. It reports whether the thread was cancelled;
// a lost lease is a 409 (see IsClaimLost).
func (c *Client) Heartbeat(ctx context.Context, turn, claim string) (expires time.Time, cancel bool, err error) {
	var out struct {
		LeaseExpires time.Time `json:"lease_expires_at"`
		Cancel       bool      `json:"cancel"`
	}
	err = c.Do(ctx, http.MethodPost, "/v1/turns/"+url.PathEscape(turn)+"/heartbeat", map[string]string{"claim": claim}, &out)
	return out.LeaseExpires, out.Cancel, err
}

// Answered is the server's acknowledgement of a response: the thread's
// status after it and, when this request recorded the answer (not a
// resend of one already recorded), the message's agent and time.
type Answered struct {
	Status string    `json:"status"`
	Agent  string    `json:"agent"`
	At     time.Time `json:"at"`
}

// Message is the message the server recorded for this answer to t, when
// the acknowledgement says (ok false for a resent answer or an older
// server that does not say).
func (a Answered) Message(t api.Turn, r api.Response) (workflow.Message, bool) {
	if a.At.IsZero() {
		return workflow.Message{}, false
	}
	return workflow.Message{Step: t.Step, Role: t.Role, Agent: a.Agent, Content: r.Content, Meta: r.Meta,
		Error: r.Error, At: a.At, Instruction: t.Instruction, Adapter: r.Adapter, Usage: r.Usage,
		Commit: r.Commit, Changes: r.Changes}, true
}

// Respond delivers a turn's answer; a 409 means the claim is no longer
// the holder's and the answer must be dropped.
func (c *Client) Respond(ctx context.Context, turn string, r api.Response) (Answered, error) {
	var out Answered
	err := c.Do(ctx, http.MethodPost, "/v1/turns/"+url.PathEscape(turn)+"/response", r, &out)
	return out, err
}

// Release gives a claimed turn back to the queue at once.
func (c *Client) Release(ctx context.Context, turn, claim string) error {
	return c.Do(ctx, http.MethodPost, "/v1/turns/"+url.PathEscape(turn)+"/release", map[string]string{"claim": claim}, nil)
}

// TurnEvents adds events (detections) of a turn this agent holds to its
// thread's trace; a lost claim is a 409 (see IsClaimLost).
func (c *Client) TurnEvents(ctx context.Context, turn, claim string, evs ...api.TurnEvent) error {
	return c.Do(ctx, http.MethodPost, "/v1/turns/"+url.PathEscape(turn)+"/events", api.TurnEvents{Claim: claim, Events: evs}, nil)
}

// IsNotHolder reports whether err is the server saying the turn is leased
// to another agent (403 not_holder: this agent's token changed since it
// claimed): stop the work, drop the answer. Any other 403 is not this.
func IsNotHolder(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusForbidden && e.Code == api.CodeNotHolder
}

// IsClaimLost reports whether err is the server saying this agent no
// longer holds the turn (409): stop the work, drop the answer.
func IsClaimLost(err error) bool { return IsStatus(err, http.StatusConflict) }
