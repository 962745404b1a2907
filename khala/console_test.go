package khala

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// testPerson is the token of the person ada whom withPerson adds to the
// server's store, as `nerve khala user add ada` would with a token of its
// own; the console checks it with the server's own PersonByToken.
const testPerson = "khala_person_test-token-for-the-console"

func withPerson(o *Options) {
	p := khaladb.Person{Name: "ada", Token: hashToken(testPerson), AddedAt: time.Now().UTC()}
	if err := o.Store.AddPerson(context.Background(), p); err != nil {
		panic(fmt.Sprintf("add person ada: %v", err))
	}
}

// browser is a cookie-keeping HTTP client of the console.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar}}
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// post sends a form as a page of origin would.
func (b *browser) post(path, origin string, form url.Values) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func (b *browser) signIn(token string) (int, string) {
	b.t.Helper()
	_, page := b.get("/signin")
	return b.post("/signin", b.base, url.Values{"csrf": {csrfOf(b.t, page)}, "token": {token}})
}

func TestConsoleSignInOnlyForPeople(t *testing.T) {
	ts := newTestServer(t, withPerson)
	agent := ts.agent("worker-1")
	b := newBrowser(t, ts.URL)
	if status, page := b.get("/"); status != 200 || !strings.Contains(page, `action="/signin"`) {
		t.Fatalf("signed out, / should show the sign-in form: %d", status)
	}
	for _, bad := range []string{agent.token, ts.enroll, "", "nonsense"} {
		status, page := b.signIn(bad)
		if status == 200 || strings.Contains(page, "Sign out") {
			t.Errorf("token %.14s… signed in (%d)", bad, status)
		}
		if bad != "" && strings.Contains(page, bad) {
			t.Errorf("the refusal repeats the token")
		}
	}
	if _, page := b.signIn(agent.token); !strings.Contains(page, "agents cannot sign in") {
		t.Errorf("an agent's token should be refused as such:\n%s", page)
	}
	status, page := b.signIn(testPerson)
	if status != 200 || !strings.Contains(page, "Sign out") || !strings.Contains(page, "ada") {
		t.Fatalf("sign-in: %d\n%s", status, page)
	}
	if strings.Contains(page, testPerson) {
		t.Error("the token is in the page after sign-in")
	}
	u, _ := url.Parse(ts.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if strings.Contains(c.Value, testPerson) {
			t.Error("the token is in a cookie")
		}
	}
	// Sign out: the session is gone.
	status, _ = b.post("/signout", ts.URL, url.Values{"csrf": {csrfOf(t, page)}})
	if status != 200 {
		t.Fatalf("sign-out: %d", status)
	}
	if _, page := b.get("/workflows"); !strings.Contains(page, `action="/signin"`) {
		t.Error("still signed in after sign-out")
	}
}

func TestConsolePagesAndEscaping(t *testing.T) {
	eachBackend(t, testConsolePages)
}

func testConsolePages(t *testing.T, bk backend) {
	ts := bk.server(t, withPerson)
	agent := ts.agent("worker-1")
	agent.putWorkflow(pairWF)
	id := agent.start("pair", map[string]any{"turns": 1}, "")
	turn := agent.claimOne()
	const evil = `<script>alert("owned")</script>`
	if status, body := agent.respond(turn, evil, nil); status != 200 {
		t.Fatalf("respond: %d %s", status, body)
	}
	b := newBrowser(t, ts.URL)
	b.signIn(testPerson)
	for _, path := range []string{"/", "/threads/" + id, "/workflows", "/workflows/pair", "/agents", "/queue", "/usage", "/inbox"} {
		status, page := b.get(path)
		if status != 200 {
			t.Errorf("%s: %d\n%s", path, status, page)
		}
	}
	_, page := b.get("/threads/" + id)
	if strings.Contains(page, evil) || !strings.Contains(page, html.EscapeString(evil)) {
		t.Errorf("the message is not escaped:\n%s", page)
	}
	if _, page := b.get("/agents"); !strings.Contains(page, "worker-1") {
		t.Errorf("agents page lacks the agent:\n%s", page)
	}
	for path, want := range map[string]int{"/threads/nope": 400, "/threads/thread-999": 404, "/?status=bogus": 400, "/?page=x": 400, "/workflows/nope": 404} {
		if status, _ := b.get(path); status != want {
			t.Errorf("%s: want %d, got %d", path, want, status)
		}
	}
	// A workspace thread shows its branch, head and what its turns changed.
	agent.putWorkflow(codedWF)
	var started startResponse
	agent.must("POST", "/v1/workflows/coded/threads", map[string]any{"workspace": map[string]any{"base": commit0}}, 201, &started)
	tk := agent.claimOne()
	agent.must("POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "edited",
		"commit": commit1, "changes": map[string]any{"files": 2, "insertions": 5, "deletions": 1}}, 200, nil)
	_, page = b.get("/threads/" + started.Thread)
	for _, want := range []string{"nerve/coded/" + started.Thread, commit1[:12], "turn commits: 1 · 2 files +5 −1", "commit " + commit1[:12]} {
		if !strings.Contains(page, want) {
			t.Errorf("workspace thread page lacks %q", want)
		}
	}
	// The API is unchanged beside it.
	if status, body := agent.do("GET", "/v1/nothing", nil); status != 404 || errCode(body) != codeNotFound {
		t.Errorf("/v1/nothing: %d %s", status, body)
	}
}

func TestConsoleRefusesCrossSitePosts(t *testing.T) {
	ts := newTestServer(t, withPerson)
	b := newBrowser(t, ts.URL)
	_, page := b.signIn(testPerson)
	tok := csrfOf(t, page)
	if status, _ := b.post("/signout", "http://evil.example", url.Values{"csrf": {tok}}); status != 403 {
		t.Errorf("sign-out from another origin: want 403, got %d", status)
	}
	if status, _ := b.post("/signout", ts.URL, url.Values{"csrf": {"forged"}}); status != 403 {
		t.Errorf("sign-out with a wrong CSRF token: want 403, got %d", status)
	}
	if status, _ := b.post("/inbox/answer", ts.URL, url.Values{"thread": {"thread-1"}, "step": {"1"}}); status != 403 {
		t.Errorf("answer without a CSRF token: want 403, got %d", status)
	}
	if _, page := b.get("/"); !strings.Contains(page, "Sign out") {
		t.Error("a refused post signed the person out")
	}
}

// An unknown path gets the console's own 404 page, signed in or not; the
// API's unknown paths keep their JSON error.
func TestConsoleOwnNotFoundPage(t *testing.T) {
	ts := newTestServer(t, withPerson)
	b := newBrowser(t, ts.URL)
	check := func(signedIn bool) {
		t.Helper()
		resp, err := b.c.Get(ts.URL + "/no/such/page")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		page := string(body)
		if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(page, "there is no page at /no/such/page") || !strings.Contains(page, `href="/static/console.css"`) {
			t.Errorf("an unknown path: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), page)
		}
		if strings.Contains(page, "Sign out") != signedIn {
			t.Errorf("signed in %v, the 404 page's navigation: %s", signedIn, page)
		}
	}
	check(false)
	b.signIn(testPerson)
	check(true)
	if status, body := ts.agent("worker-1").do("GET", "/v1/nothing", nil); status != 404 || errCode(body) != codeNotFound {
		t.Errorf("/v1/nothing: %d %s", status, body)
	}
}
