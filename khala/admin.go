package khala

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"
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
	f, err := os.CreateTemp(filepath.Dir(path), ".khala-admin-*")
	if err != nil {
		return fmt.Errorf("write admin file: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(0o600); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
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

// How IssueToken reached the database.
const (
	ViaDatabase = "database" // no server held it: written directly
	ViaServer   = "server"   // through the running server's admin path
)

// IssueToken issues an enrollment token into the Khala database db. When
// no server holds the file it opens it directly (creating it if absent);
// when a server does (bbolt allows one process), it asks that server
// through its admin file. It reports which way it went.
func IssueToken(ctx context.Context, db string, uses int, ttl time.Duration) (EnrollTokenResponse, string, error) {
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return EnrollTokenResponse{}, "", fmt.Errorf("create the database's directory: %w", err)
	}
	st, err := OpenBolt(db, 200*time.Millisecond)
	if err == nil {
		defer st.Close()
		resp, err := IssueEnrollToken(ctx, st, uses, ttl, time.Now().UTC())
		return resp, ViaDatabase, err
	}
	if !errors.Is(err, ErrLocked) {
		return EnrollTokenResponse{}, "", err
	}
	info, err := readAdminFile(AdminFile(db))
	if errors.Is(err, fs.ErrNotExist) {
		return EnrollTokenResponse{}, "", fmt.Errorf("%s is held by another process but %s does not exist; is that process a nerve khala serve of this version?", db, AdminFile(db))
	}
	if err != nil {
		return EnrollTokenResponse{}, "", err
	}
	resp, err := adminIssue(ctx, info, uses, ttl)
	return resp, ViaServer, err
}

func adminIssue(ctx context.Context, info adminInfo, uses int, ttl time.Duration) (EnrollTokenResponse, error) {
	var out EnrollTokenResponse
	body, _ := json.Marshal(EnrollTokenRequest{Uses: uses, TTL: ttl.String()})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, info.URL+"/v1/admin/enroll-tokens", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("reach the khala server holding the database (pid %d) at %s: %w", info.PID, info.URL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		var eb errorBody
		msg := resp.Status
		if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
			msg = eb.Error.Message
		}
		return out, fmt.Errorf("the khala server at %s refused: %s", info.URL, msg)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("the khala server at %s: %w", info.URL, err)
	}
	return out, nil
}
