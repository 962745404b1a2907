package console

import (
	"net/http"
	"strings"
	"time"
)

// signInData is the sign-in page's.
type signInData struct {
	CSRF, Error, Help string
}

func (c *Console) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if _, se := c.session(r); se != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.signInForm(w, r, http.StatusOK, "")
}

// signInForm renders the form with a fresh CSRF token in a short-lived
// cookie (double submit: there is no session to hold it yet).
func (c *Console) signInForm(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	setCookie(w, r, preCookie, tok, c.opts.Now().Add(time.Hour))
	c.render(w, r, status, view{name: "signin", title: "Sign in", data: signInData{CSRF: tok, Error: msg, Help: c.opts.SignInHelp}}, user{})
}

func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if err := checkOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	pre, err := r.Cookie(preCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), pre.Value) {
		http.Error(w, "refused: the form's CSRF token is missing or stale; reload the sign-in page", http.StatusForbidden)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		c.signInForm(w, r, http.StatusBadRequest, "enter your token")
		return
	}
	if c.opts.Auth == nil {
		c.signInForm(w, r, http.StatusUnauthorized, "this server has no people's tokens yet")
		return
	}
	person, err := c.opts.Auth(r.Context(), token)
	if err != nil {
		// The reason, never the token.
		c.log.Info("console sign-in refused", "remote", r.RemoteAddr, "reason", err.Error())
		c.signInForm(w, r, http.StatusUnauthorized, err.Error())
		return
	}
	c.start(w, r, person)
}

// start signs person in and goes to the threads list.
func (c *Console) start(w http.ResponseWriter, r *http.Request, person string) {
	id, se := c.sessions.create(person)
	setCookie(w, r, sessionCookie, id, se.expires)
	setCookie(w, r, preCookie, "", time.Time{})
	c.log.Info("console sign-in", "person", person)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (c *Console) handleOnce(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	c.onceMu.Lock()
	person, ok := c.once[code]
	delete(c.once, code)
	c.onceMu.Unlock()
	if !ok || code == "" {
		c.signInForm(w, r, http.StatusUnauthorized, "this sign-in link is unknown or was used already; run nerve console again for a new one")
		return
	}
	c.start(w, r, person)
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) {
	id, se := c.session(r)
	if se == nil {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	if err := checkOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if !sameToken(r.PostFormValue("csrf"), se.csrf) {
		http.Error(w, "refused: the form's CSRF token is missing or stale; reload the page", http.StatusForbidden)
		return
	}
	c.sessions.end(id)
	setCookie(w, r, sessionCookie, "", time.Time{})
	c.log.Info("console sign-out", "person", se.person)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// endSession ends the request's session, which its person may no longer
// use, and says why on the sign-in page (or in a 401 to a stream).
func (c *Console) endSession(w http.ResponseWriter, r *http.Request, se *session, why error) {
	if id, _ := c.session(r); id != "" {
		c.sessions.end(id)
	}
	setCookie(w, r, sessionCookie, "", time.Time{})
	c.log.Info("console session ended", "person", se.person, "reason", why.Error())
	msg := why.Error()
	if r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, "/live") {
		http.Error(w, msg, http.StatusUnauthorized)
		return
	}
	c.signInForm(w, r, http.StatusUnauthorized, msg)
}
