package remote

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nerve-agents/nerve/internal/atomicfile"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/workflow"
)

// A person's token for a remote (nerve khala user add) answers human turns
// and reads threads; it is kept apart from the agent token, in its own
// 0600 file, never in nerve.yaml.

func personTokenPath(home, remote string) string {
	return filepath.Join(home, "person-tokens", remote)
}

// SavePersonToken stores the person token for remote, atomically, mode 0600.
func SavePersonToken(home, remote, token string) error {
	dir := filepath.Join(home, "person-tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(personTokenPath(home, remote), []byte(token+"\n"), 0o600)
}

// LoadPersonToken returns the stored person token for remote, "" when
// there is none. A file readable by others is refused.
func LoadPersonToken(home, remote string) (string, error) {
	return loadSecret(personTokenPath(home, remote))
}

// RemovePersonToken forgets the person token for remote.
func RemovePersonToken(home, remote string) error {
	err := os.Remove(personTokenPath(home, remote))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// asPerson is c acting with its person token, when it has one.
func (c *Client) asPerson() *Client {
	cc := *c
	if c.PersonToken != "" {
		cc.Token = c.PersonToken
	}
	return &cc
}

// Inbox is GET /v1/inbox: the human turns waiting that this client's
// person may answer, oldest first.
func (c *Client) Inbox(ctx context.Context) ([]workflow.Waiting, error) {
	var out []workflow.Waiting
	err := c.asPerson().Do(ctx, http.MethodGet, "/v1/inbox", nil, &out)
	return out, err
}

// Notices is GET /v1/notices: the blocking notices of the remote's
// threads that no turn has started after, oldest first; none from a Khala
// older than the endpoint (404).
func (c *Client) Notices(ctx context.Context) ([]api.Notice, error) {
	var out []api.Notice
	err := c.asPerson().Do(ctx, http.MethodGet, "/v1/notices", nil, &out)
	if IsStatus(err, http.StatusNotFound) {
		return nil, nil
	}
	return out, err
}

// Answer answers the human turn turn of thread with a person's answer
// (POST /v1/threads/{thread}/turns/{turn}/answer) and returns who
// answered: the person the remote knows the token as. It is not retried:
// a retried answer that was recorded the first time is refused as
// answered twice.
func (c *Client) Answer(ctx context.Context, thread, turn string, a workflow.Answer) (by string, err error) {
	cc := c.asPerson()
	cc.Retries = 0
	path := "/v1/threads/" + url.PathEscape(thread) + "/turns/" + url.PathEscape(turn) + "/answer"
	var out struct {
		Agent string `json:"agent"`
	}
	err = cc.Do(ctx, http.MethodPost, path, a, &out)
	return out.Agent, err
}

// IsForbidden reports whether the remote refused the request for who is
// asking (an agent's token answering, a person not in answered_by).
func IsForbidden(err error) bool { return IsStatus(err, http.StatusForbidden) }

// loadSecret reads a token file, refusing one readable by others.
func loadSecret(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", &permError{path: path, mode: fi.Mode().Perm()}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

type permError struct {
	path string
	mode fs.FileMode
}

func (e *permError) Error() string {
	return "token file " + e.path + " is readable by others (mode " + e.mode.String() + "); run: chmod 600 " + e.path
}
