package khala

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/nerve-agents/nerve/internal/atomicfile"
)

// AdminFile is where a running server leaves its local admin credentials:
// beside its database, mode 0600, so only the user who runs the server
// (and root) can issue enrollment tokens through it.
func AdminFile(db string) string { return db + ".admin" }

type adminInfo struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
}

// writeAdminFile writes info atomically: a reader sees the old file or
// the whole new one, never a token without its URL.
func writeAdminFile(path string, info adminInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write admin file %s: %w", path, err)
	}
	return nil
}

// removeAdminFile removes the admin file if it is still ours (a second
// server refused the lock must not remove the first one's).
func removeAdminFile(path, token string) {
	if info, err := readAdminFile(path); err == nil && info.Token == token {
		os.Remove(path)
	}
}

func readAdminFile(path string) (adminInfo, error) {
	var info adminInfo
	data, err := os.ReadFile(path)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	return info, nil
}

// call asks the server that wrote info: method on path with in (nil for
// no body) as JSON, decoding the reply into out (nil to ignore it). A
// status other than want is the server's refusal, an *apiError.
func (info adminInfo) call(ctx context.Context, method, path string, in any, want int, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, info.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reach the khala server holding the database (pid %d) at %s: %w", info.PID, info.URL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		var eb errorBody
		msg := resp.Status
		if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
			msg = eb.Error.Message
		}
		return &apiError{resp.StatusCode, eb.Error.Code, msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the khala server at %s: %w", info.URL, err)
	}
	return nil
}
