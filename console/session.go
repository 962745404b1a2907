package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Authenticator turns a person's token into the person's name. It answers
// an error (its message is shown, so it must not repeat the token) for an
// unknown token and for any token that is not a person's.
type Authenticator func(ctx context.Context, token string) (person string, err error)

// Recheck says whether person, signed in at since, may still use the
// console: nil, an error wrapping ErrSessionEnded saying why not (a
// removed person's session ends at once), or another error when it cannot
// tell (the page fails; the session stays).
type Recheck func(ctx context.Context, person string, since time.Time) error

// ErrSessionEnded is a session its person may no longer use.
var ErrSessionEnded = errors.New("signed out")

// Cookie names.
const (
	sessionCookie = "nerve_session"
	// preCookie carries the CSRF token of the sign-in form, before there
	// is a session to hold it.
	preCookie = "nerve_signin"
)

type session struct {
	person  string
	csrf    string
	since   time.Time // signed in
	expires time.Time
}

// sessions are kept in memory: a restart signs everyone out.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, now: now}
}

// randomToken is 192 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(person string) (id string, se *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.m { // drop expired ones as new ones come
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	id = randomToken()
	se = &session{person: person, csrf: randomToken(), since: now, expires: now.Add(s.ttl)}
	s.m[id] = se
	return id, se
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[id]
	if se == nil {
		return nil
	}
	if s.now().After(se.expires) {
		delete(s.m, id)
		return nil
	}
	return se
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// setCookie writes a cookie the way every console cookie is: HttpOnly,
// SameSite=Strict, Secure over TLS.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, Expires: expires}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// session returns the request's session, or nil.
func (c *Console) session(r *http.Request) (string, *session) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return "", nil
	}
	return ck.Value, c.sessions.get(ck.Value)
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

var errCrossSite = errors.New("refused: this form was not posted from the console itself")

// checkOrigin refuses a POST that a browser says came from another site.
// Browsers send Origin with every POST; a request with neither Origin nor
// Sec-Fetch-Site is not from a browser page, and the CSRF token decides.
func checkOrigin(r *http.Request) error {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return errCrossSite
	}
	if o := r.Header.Get("Origin"); o != "" {
		// Only the host is compared: behind a proxy that ends TLS the
		// scheme the browser used is not the one seen here.
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errCrossSite
		}
	}
	return nil
}
