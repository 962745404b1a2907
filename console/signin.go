package console

import (
	"net/http"
	"strings"
	"time"
)

// signInData is the sign-in page's. With Code set it is the page of a
// one-time link: a button that signs Person in by posting the code.
type signInData struct {
	CSRF, Error, Help string
	Code, Person      string
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
	c.signInPage(w, r, status, signInData{Error: msg, Help: c.opts.SignInHelp})
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request, status int, d signInData) {
	d.CSRF = randomToken()
	setCookie(w, r, preCookie, d.CSRF, c.opts.Now().Add(time.Hour))
	c.render(w, r, status, view{name: "signin", title: "Sign in", data: d}, user{})
}

// checkSignInForm refuses a sign-in post from another site or without the
// CSRF token its form was given.
func checkSignInForm(w http.ResponseWriter, r *http.Request) bool {
	if err := checkOrigin(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return false
	}
	pre, err := r.Cookie(preCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), pre.Value) {
		http.Error(w, "refused: the form's CSRF token is missing or stale; reload the sign-in page", http.StatusForbidden)
		return false
	}
	return true
}

func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if !checkSignInForm(w, r) {
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

// errOnceSpent is a one-time link that signs no one in.
const errOnceSpent = "this sign-in link is unknown or was used already; run nerve console again for a new one"

// handleOncePage shows a one-time link's page: a button that posts its
// code. Opening the link spends nothing, so a chat's link preview or a
// browser's prefetch cannot use it up before its person clicks.
func (c *Console) handleOncePage(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	c.onceMu.Lock()
	person, ok := c.once[code]
	c.onceMu.Unlock()
	if !ok || code == "" {
		c.signInForm(w, r, http.StatusUnauthorized, errOnceSpent)
		return
	}
	c.signInPage(w, r, http.StatusOK, signInData{Code: code, Person: person})
}

// handleOnce spends a one-time link's code, posted by its page's button.
func (c *Console) handleOnce(w http.ResponseWriter, r *http.Request) {
	if !checkSignInForm(w, r) {
		return
	}
	code := r.PostFormValue("code")
	c.onceMu.Lock()
	person, ok := c.once[code]
	delete(c.once, code)
	c.onceMu.Unlock()
	if !ok || code == "" {
		c.signInForm(w, r, http.StatusUnauthorized, errOnceSpent)
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
