package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/nerve-agents/nerve/internal/telemetry"
)

// Client talks to one Khala server.
type Client struct {
	// Name is the remote's name in nerve.yaml ("origin"), for messages.
	Name    string
	BaseURL string
	Token   string
	// PersonToken, when set, is a person's token for this remote: Inbox
	// and Answer use it (an agent's token cannot answer).
	PersonToken string
	HTTP        *http.Client
	// Timeout bounds each request (long polls add their wait to it).
	Timeout time.Duration
	// Retries is how often a transient failure is retried (0: none).
	Retries int
	// Sleep waits between retries (tests make it instant).
	Sleep func(context.Context, time.Duration) error
}

// New returns a client of the remote name at url using token.
func New(name, url, token string) *Client {
	return &Client{Name: name, BaseURL: strings.TrimRight(url, "/"), Token: token,
		HTTP: &http.Client{}, Timeout: 15 * time.Second, Retries: 2}
}

// Error is a failed request, with what to do about it.
type Error struct {
	Remote  string
	URL     string
	Status  int    // 0 when the server was not reached
	Code    string // the server's error code
	Message string
	// ServerHint is what the server says to do next, when it says.
	ServerHint string
	// NotKhala: what answers at URL is not a Khala server (its
	// /v1/health does not answer as one).
	NotKhala bool
	Err      error
}

func (e *Error) Error() string {
	who := e.Remote
	if who == "" {
		who = e.URL
	}
	if e.Status == 0 {
		return fmt.Sprintf("remote %s (%s): %s", who, e.URL, e.Message)
	}
	return fmt.Sprintf("remote %s: %s", who, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode: the remote refused or was unreachable; the work failed.
func (e *Error) ExitCode() int { return 1 }

// Hint says what to do next.
func (e *Error) Hint() string {
	switch {
	case e.NotKhala:
		return fmt.Sprintf("check the remote's URL (nerve remote list): a Khala server answers GET %s/v1/health", e.URL)
	case e.ServerHint != "":
		return e.ServerHint
	case e.Status == http.StatusUnauthorized:
		return fmt.Sprintf("this agent's token for %s is missing or no longer accepted; enroll again: nerve init --remote %s=%s --enroll-token TOKEN", e.Remote, e.Remote, e.URL)
	case e.Status == 0 && errors.Is(e.Err, syscall.ECONNREFUSED):
		return fmt.Sprintf("is the Khala server at %s running? ('nerve khala serve' starts one)", e.URL)
	case e.Status == 0:
		return fmt.Sprintf("check the remote's URL: nerve remote list (%s)", e.URL)
	}
	return ""
}

// Transient reports whether retrying may help: the server was not reached,
// timed out, or answered 502/503/504 or 429.
func (e *Error) Transient() bool {
	switch e.Status {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// IsStatus reports whether err is an answer with the given status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Do sends a JSON request and decodes the JSON answer into out (when not
// nil), retrying transient failures with capped, jittered backoff.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, path, body, out, c.Timeout)
		var e *Error
		if err == nil || !errors.As(err, &e) || !e.Transient() || attempt >= c.Retries || ctx.Err() != nil {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		if err := c.sleep(ctx, wait); err != nil {
			return err
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	return Wait(ctx, d)
}

// Wait sleeps for d, or until ctx is done (then it returns ctx's error):
// the wait of every retry loop that talks to a remote.
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return &Error{Remote: c.Name, URL: c.BaseURL, Status: resp.StatusCode, Message: "malformed answer: " + err.Error(), Err: err}
	}
	return nil
}

// send performs one request and turns any failure into an *Error; the
// caller closes the body of a successful answer.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, &Error{Remote: c.Name, URL: c.BaseURL, Message: err.Error(), Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	telemetry.Inject(ctx, req.Header)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err()
		}
		return nil, &Error{Remote: c.Name, URL: c.BaseURL, Message: describeNetErr(err), Err: err}
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Hint    string `json:"hint"`
			} `json:"error"`
		}
		e := &Error{Remote: c.Name, URL: c.BaseURL, Status: resp.StatusCode, Message: resp.Status}
		if json.Unmarshal(raw, &eb) == nil && eb.Error.Message != "" {
			e.Code, e.Message, e.ServerHint = eb.Error.Code, eb.Error.Message, eb.Error.Hint
		} else if path == healthPath {
			e.NotKhala, e.Message = true, fmt.Sprintf("no Khala at %s (GET %s: %s)", c.BaseURL, healthPath, resp.Status)
		} else if notFoundish(resp.StatusCode) {
			// Khala answers every error with its JSON: whatever answered
			// this may not be one. Its health says; the status stays this
			// answer's, for callers that act on it.
			if why := c.notKhala(ctx); why != "" {
				e.NotKhala, e.Message = true, why
			}
		}
		return nil, e
	}
	return resp, nil
}

func describeNetErr(err error) string {
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case errors.As(err, &op) && op.Op == "dial":
		return "cannot connect: " + op.Err.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "unknown host " + dns.Name
	}
	return err.Error()
}

const healthPath = "/v1/health"

// Health is GET /v1/health: whether the server answers, and its version.
func (c *Client) Health(ctx context.Context) (version string, err error) {
	var out struct {
		OK      bool   `json:"ok"`
		Version string `json:"version"`
	}
	if err = c.Do(ctx, http.MethodGet, healthPath, nil, &out); err == nil && !out.OK {
		err = c.notKhalaAnswer()
	}
	return out.Version, err
}

// notFoundish are the statuses of a server that has no such endpoint or
// method: a URL that points at something other than a Khala.
func notFoundish(status int) bool {
	return status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented
}

// notKhala asks /v1/health whether a Khala answers at c's URL: it says
// why not, or "" when one does (or the question failed).
func (c *Client) notKhala(ctx context.Context) string {
	var out struct {
		OK bool `json:"ok"`
	}
	err := c.once(ctx, http.MethodGet, healthPath, nil, &out, 5*time.Second)
	var e *Error
	switch {
	case errors.As(err, &e) && e.NotKhala:
		return e.Message
	case err == nil && !out.OK:
		return c.notKhalaAnswer().Message
	}
	return ""
}

func (c *Client) notKhalaAnswer() *Error {
	return &Error{Remote: c.Name, URL: c.BaseURL, Status: http.StatusOK, NotKhala: true,
		Message: fmt.Sprintf("no Khala at %s (GET %s does not answer {\"ok\": true})", c.BaseURL, healthPath)}
}

// Me is GET /v1/agents/me: the agent this client's token belongs to.
func (c *Client) Me(ctx context.Context) (agent string, err error) {
	var out struct {
		Agent string `json:"agent"`
	}
	err = c.Do(ctx, http.MethodGet, "/v1/agents/me", nil, &out)
	return out.Agent, err
}

// Enroll is POST /v1/agents with an enrollment token: it registers name and
// returns the new agent token.
func (c *Client) Enroll(ctx context.Context, enrollToken, name string) (string, error) {
	cc := *c
	cc.Token = enrollToken
	cc.Retries = 0 // a retried enrollment could spend a second use of the token
	var out struct {
		Agent string `json:"agent"`
		Token string `json:"token"`
	}
	if err := cc.Do(ctx, http.MethodPost, "/v1/agents", map[string]string{"name": name}, &out); err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", &Error{Remote: c.Name, URL: c.BaseURL, Status: http.StatusOK, Message: "enrollment answered without a token"}
	}
	return out.Token, nil
}
