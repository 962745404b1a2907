package khala

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
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
func newToken(prefix string) (string, Hash) {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	tok := prefix + base64.RawURLEncoding.EncodeToString(b)
	return tok, hashToken(tok)
}

// hashToken is what is stored and looked up: a lookup by the hash of a
// 192-bit secret leaks nothing useful through timing, and the final
// comparison (sameHash) is constant-time anyway.
func hashToken(tok string) Hash { return sha256.Sum256([]byte(tok)) }

// sameHash compares in constant time.
func sameHash(a, b Hash) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }

// newClaimID returns a lease id: 128 random bits, the capability to answer
// the turn.
func newClaimID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
