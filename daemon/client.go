package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// Client talks to the daemon of one NERVE_HOME over its socket.
type Client struct {
	Socket string
	http   *http.Client
	// turn: Socket is a turn's (NERVE_TURN_SOCKET), which serves that
	// turn's rights only (turnsocket.go).
	turn bool
}

// NewClient returns a client for the socket at path.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: 2,
	}
	return &Client{Socket: socket, http: &http.Client{Transport: tr}}
}

// NewTurnClient returns a client of a turn's socket (NERVE_TURN_SOCKET).
func NewTurnClient(socket string) *Client {
	c := NewClient(socket)
	c.turn = true
	return c
}

// NotRunningError means nothing answers on the socket.
type NotRunningError struct {
	Socket string
	Err    error
	// Turn: the socket is a turn's, which ends with the turn.
	Turn bool
}

func (e *NotRunningError) Error() string {
	if e.Turn {
		return fmt.Sprintf("the turn's channel to nerve does not answer (%s=%s): its turn has ended", TurnSocketEnv, e.Socket)
	}
	return fmt.Sprintf("no nerve daemon is running (%s)", e.Socket)
}
func (e *NotRunningError) Unwrap() error { return e.Err }
func (e *NotRunningError) ExitCode() int { return 1 }
func (e *NotRunningError) Hint() string {
	if e.Turn {
		return "a turn reaches nerve only while it runs"
	}
	return "start it with 'nerve daemon start' (NERVE_NO_AUTOSTART=1 is set or autostart failed)"
}

// APIError is an error answer of the daemon.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Field is the input a bad answer got wrong, "" for none.
	Field string
	hint  string
}

func (e *APIError) Error() string { return e.Message }
func (e *APIError) Hint() string  { return e.hint }

// ExitCode: bad requests and unknown names are usage errors (2); the rest
// are failures (1).
func (e *APIError) ExitCode() int {
	if e.Code == codeUsage || e.Code == codeNotFound {
		return 2
	}
	return 1
}

// IsNotFound reports whether err is the daemon saying "unknown".
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == codeNotFound
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+apiHost+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &oe) || errors.As(err, &ne) {
			return nil, &NotRunningError{Socket: c.Socket, Err: err, Turn: c.turn}
		}
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var e apiError
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
			return nil, &APIError{Status: resp.StatusCode, Code: codeInternal, Message: fmt.Sprintf("daemon answered %s", resp.Status)}
		}
		return nil, &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Field: e.Error.Field, hint: e.Error.Hint}
	}
	return resp, nil
}

// Ping reports whether a daemon answers, within a short timeout: the
// daemon's status, or on a turn's socket, which serves no status, the
// turn it serves.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var err error
	if c.turn {
		_, err = c.Turn(ctx)
	} else {
		_, err = c.Status(ctx)
	}
	return err
}

// IsTurn reports whether c talks to a turn's socket.
func (c *Client) IsTurn() bool { return c.turn }

// Turn returns the turn a turn's socket serves.
func (c *Client) Turn(ctx context.Context) (*TurnInfo, error) {
	var t TurnInfo
	return &t, c.do(ctx, http.MethodGet, "/v1/turn", nil, &t)
}

// Status returns the daemon's state.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Start starts a local thread.
func (c *Client) Start(ctx context.Context, req StartRequest) (*workflow.Thread, error) {
	if req.File != "" {
		req.File = absPath(req.File)
	}
	var t workflow.Thread
	return &t, c.do(ctx, http.MethodPost, "/v1/threads", req, &t)
}

// Thread returns one thread.
func (c *Client) Thread(ctx context.Context, id string) (*workflow.Thread, error) {
	var t workflow.Thread
	return &t, c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id), nil, &t)
}

// Threads lists threads, newest first.
func (c *Client) Threads(ctx context.Context, workflowName, status string, limit int) ([]*workflow.Thread, error) {
	q := url.Values{}
	if workflowName != "" {
		q.Set("workflow", workflowName)
	}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var ts []*workflow.Thread
	return ts, c.do(ctx, http.MethodGet, "/v1/threads?"+q.Encode(), nil, &ts)
}

// Cancel cancels a running thread and returns it as it ended.
func (c *Client) Cancel(ctx context.Context, id string) (*workflow.Thread, error) {
	var t workflow.Thread
	return &t, c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(id)+"/cancel", nil, &t)
}

// Messages queries a thread's messages.
func (c *Client) Messages(ctx context.Context, id string, f workflow.Filter) ([]workflow.Message, error) {
	var ms []workflow.Message
	return ms, c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id)+"/messages?"+f.Values().Encode(), nil, &ms)
}

// Events calls fn for each event of a thread after seq; with follow it
// keeps going until the thread ends or ctx is done.
func (c *Client) Events(ctx context.Context, id string, after uint64, follow bool, fn func(workflow.Event) error) error {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(id)+"/events?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e workflow.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("read event stream: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

// Shutdown asks the daemon to stop gracefully.
func (c *Client) Shutdown(ctx context.Context) (int, error) {
	var out struct {
		PID int `json:"pid"`
	}
	return out.PID, c.do(ctx, http.MethodPost, "/v1/shutdown", nil, &out)
}

// Answer records a person's answer to a human turn of a local thread.
func (c *Client) Answer(ctx context.Context, id string, req AnswerRequest) (*AnswerResult, error) {
	var out AnswerResult
	return &out, c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(id)+"/answer", req, &out)
}

// Inbox lists the local human turns waiting for a person.
func (c *Client) Inbox(ctx context.Context) ([]workflow.Waiting, error) {
	var out []workflow.Waiting
	return out, c.do(ctx, http.MethodGet, "/v1/inbox", nil, &out)
}

// MayAnswer returns nil when the daemon sees the caller outside every
// turn, and its refusal (403) when the caller is inside one.
func (c *Client) MayAnswer(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/v1/may-answer", nil, nil)
}
