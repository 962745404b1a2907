package khala

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// Token prefixes say what a token is for, so a user who pastes the wrong
// one (and a secret scanner) can tell them apart.
const (
	prefixAgent  = "khala_agent_"
	prefixEnroll = "khala_enroll_"
	prefixAdmin  = "khala_admin_"
)

// tokenBytes is the randomness of every token: 192 bits.
const tokenBytes = 24

// newToken returns a fresh random token with prefix and its hash.
func newToken(prefix string) (string, khaladb.Hash) {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	tok := prefix + base64.RawURLEncoding.EncodeToString(b)
	return tok, hashToken(tok)
}

// hashToken is what is stored and looked up: a lookup by the hash of a
// 192-bit secret leaks nothing useful through timing, and the final
// comparison (sameHash) is constant-time anyway.
func hashToken(tok string) khaladb.Hash { return sha256.Sum256([]byte(tok)) }

// Issuing enrollment tokens: into any Storage (IssueEnrollToken), and into
// a database by its name, whichever process holds it (IssueToken for the
// bbolt file, IssuePostgresToken). See "Issuing enrollment tokens" in
// doc.go.

// IssueEnrollToken creates an enrollment token for uses agents (at least
// one), valid for ttl (0: no expiry), in st. The agents it enrolls carry
// scopes (none given: DefaultAgentScopes; each one of AgentScopes).
func IssueEnrollToken(ctx context.Context, st khaladb.Storage, uses int, ttl time.Duration, now time.Time, scopes ...string) (EnrollTokenResponse, error) {
	if uses <= 0 {
		uses = 1
	}
	scopes, err := agentScopesCheck(scopes, AgentScopes)
	if err != nil {
		return EnrollTokenResponse{}, err
	}
	tok, h := newToken(prefixEnroll)
	et := khaladb.EnrollToken{Hash: h, Uses: uses, CreatedAt: now, Scopes: scopesOf(scopes, DefaultAgentScopes)}
	if ttl > 0 {
		et.ExpiresAt = now.Add(ttl)
	}
	if err := st.AddEnrollToken(ctx, et); err != nil {
		return EnrollTokenResponse{}, err
	}
	return EnrollTokenResponse{Token: tok, Uses: uses, ExpiresAt: et.ExpiresAt, Scopes: et.Scopes}, nil
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
func IssueToken(ctx context.Context, db string, uses int, ttl time.Duration, scopes ...string) (EnrollTokenResponse, string, error) {
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return EnrollTokenResponse{}, "", fmt.Errorf("create the database's directory: %w", err)
	}
	var resp EnrollTokenResponse
	where, err := onBoltFile(db, func(st khaladb.Storage) (err error) {
		resp, err = IssueEnrollToken(ctx, st, uses, ttl, time.Now().UTC(), scopes...)
		return err
	}, func(info adminInfo) (err error) {
		resp, err = adminIssue(ctx, info, uses, ttl, scopes)
		return err
	})
	return resp, where, err
}

func adminIssue(ctx context.Context, info adminInfo, uses int, ttl time.Duration, scopes []string) (EnrollTokenResponse, error) {
	var out EnrollTokenResponse
	err := info.call(ctx, http.MethodPost, "/v1/admin/enroll-tokens", EnrollTokenRequest{Uses: uses, TTL: ttl.String(), Scopes: scopes}, http.StatusCreated, &out)
	var refused *apiError
	if errors.As(err, &refused) {
		return out, fmt.Errorf("the khala server at %s refused: %w", info.URL, err)
	}
	return out, err
}

// IssuePostgresToken issues an enrollment token into the PostgreSQL
// database dsn (migrating its schema first if need be): replicas hold no
// lock on it, so no server is asked.
func IssuePostgresToken(ctx context.Context, dsn string, uses int, ttl time.Duration, scopes ...string) (EnrollTokenResponse, error) {
	var resp EnrollTokenResponse
	err := onPostgres(ctx, dsn, func(st khaladb.Storage) (err error) {
		resp, err = IssueEnrollToken(ctx, st, uses, ttl, time.Now().UTC(), scopes...)
		return err
	})
	return resp, err
}

// bearer returns the token of an Authorization: Bearer header, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return ""
	}
	return strings.TrimSpace(h[len(p):])
}
