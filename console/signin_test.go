package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// A one-time link is spent by its page's button, not by opening it: a
// link preview or a prefetch GETs it and leaves it whole. The button's
// post is checked as the console's other forms are (origin, CSRF token).
func TestOnceLinkIsSpentByItsButton(t *testing.T) {
	c := New(Options{Source: &inboxOnly{}})
	link := c.OneTimeSignIn("ada")
	do := func(req *http.Request, cookies []*http.Cookie) *httptest.ResponseRecorder {
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		return rec
	}
	post := func(v url.Values, origin string, cookies []*http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/signin/once", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		return do(req, cookies)
	}
	formRE := regexp.MustCompile(`(?s)action="/signin/once".*name="csrf" value="([^"]+)".*name="code" value="([^"]+)"`)
	var page *httptest.ResponseRecorder
	for range 3 { // previews, then the person's browser
		page = do(httptest.NewRequest("GET", link, nil), nil)
		if page.Code != 200 || !formRE.MatchString(page.Body.String()) || !strings.Contains(page.Body.String(), "Sign in as ada") {
			t.Fatalf("the link's page: %d\n%s", page.Code, page.Body)
		}
		for _, ck := range page.Result().Cookies() {
			if ck.Name == sessionCookie {
				t.Fatal("opening the link signed in")
			}
		}
	}
	m := formRE.FindStringSubmatch(page.Body.String())
	pre := page.Result().Cookies()
	good := url.Values{"csrf": {m[1]}, "code": {m[2]}}
	if rec := post(url.Values{"csrf": {"forged"}, "code": {m[2]}}, "http://example.com", pre); rec.Code != 403 {
		t.Errorf("a post with a wrong CSRF token: %d", rec.Code)
	}
	if rec := post(good, "http://evil.example", pre); rec.Code != 403 {
		t.Errorf("a post from another site: %d", rec.Code)
	}
	if rec := post(good, "http://example.com", nil); rec.Code != 403 {
		t.Errorf("a post without the page's cookie: %d", rec.Code)
	}
	in := post(good, "http://example.com", pre)
	var session *http.Cookie
	for _, ck := range in.Result().Cookies() {
		if ck.Name == sessionCookie && ck.Value != "" {
			session = ck
		}
	}
	if in.Code != http.StatusSeeOther || session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the button's post: %d, session %v", in.Code, session)
	}
	if rec := do(httptest.NewRequest("GET", "/inbox", nil), []*http.Cookie{session}); rec.Code != 200 || !strings.Contains(rec.Body.String(), "Sign out") {
		t.Errorf("the session does not open the inbox: %d", rec.Code)
	}
	if rec := post(good, "http://example.com", pre); rec.Code != 401 {
		t.Errorf("the code posted again: %d", rec.Code)
	}
	if rec := do(httptest.NewRequest("GET", link, nil), nil); rec.Code != 401 || formRE.MatchString(rec.Body.String()) {
		t.Errorf("the spent link's page: %d", rec.Code)
	}
}
