package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startConsole runs `nerve console` on a free loopback port and returns
// its one-time sign-in link; the process is stopped at cleanup.
func startConsole(t *testing.T, e *env) string {
	t.Helper()
	cmd := exec.Command(nerveBin(t), "console", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	cmd.Dir = e.home
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("nerve console did not stop cleanly: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("nerve console did not stop on SIGINT")
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	select {
	case l := <-line:
		i := strings.Index(l, "http://127.0.0.1:")
		if i < 0 {
			t.Fatalf("no link in %q (stderr %s)", l, stderr.String())
		}
		return l[i:]
	case <-time.After(60 * time.Second):
		t.Fatalf("nerve console printed no link; stderr: %s", stderr.String())
	}
	return ""
}

// onceForm reads the one-time link's page: the CSRF token and code its
// sign-in button posts.
var onceForm = regexp.MustCompile(`(?s)<form method="post" action="/signin/once".*?name="csrf" value="([^"]+)".*?name="code" value="([^"]+)"`)

// useOnceLink opens a one-time sign-in link with c as a browser does:
// GET shows a button, whose POST signs in. It returns the POST's answer.
func useOnceLink(t *testing.T, c *http.Client, link string) (*http.Response, string) {
	t.Helper()
	status, page := consoleGet(t, c, link)
	m := onceForm.FindStringSubmatch(page)
	if status != 200 || m == nil {
		t.Fatalf("the link's page: %d, want a sign-in button:\n%s", status, page)
	}
	base := link[:strings.Index(link, "/signin")]
	form := url.Values{"csrf": {m[1]}, "code": {m[2]}}
	req, _ := http.NewRequest("POST", base+"/signin/once", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signedInConsole starts `nerve console` for e and signs a cookie-keeping
// client in with its link; it returns the client and the console's base URL.
func signedInConsole(t *testing.T, e *env) (*http.Client, string) {
	t.Helper()
	link := startConsole(t, e)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	if resp, page := useOnceLink(t, c, link); resp.StatusCode != 200 || !strings.Contains(page, "Sign out") {
		t.Fatalf("the link did not sign in: %d\n%s", resp.StatusCode, page)
	}
	return c, link[:strings.Index(link, "/signin")]
}

func TestConsoleLocalDaemon(t *testing.T) {
	e := newEnv(t)
	e.write("workflows/quick.yaml", quickWorkflow)
	run := decodeRun(t, e.must(0, "workflow", "run", "quick", "--json"))
	id := run.Thread[strings.IndexByte(run.Thread, '#')+1:]
	link := startConsole(t, e)
	base := link[:strings.Index(link, "/signin")]

	// A link preview or a prefetch (a GET, without the page's cookie)
	// spends nothing.
	for range 2 {
		if status, page := consoleGet(t, &http.Client{}, link); status != 200 || strings.Contains(page, "Sign out") || !onceForm.MatchString(page) {
			t.Fatalf("a preview of the link: %d\n%s", status, page)
		}
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, page := useOnceLink(t, c, link)
	if resp.StatusCode != 200 || !strings.Contains(page, "Sign out") || !strings.Contains(page, id) {
		t.Fatalf("the link did not sign in to the threads list: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(resp.Request.URL.String(), "code=") {
		t.Errorf("the code stays in the URL after sign-in: %s", resp.Request.URL)
	}
	// The link is spent.
	other, _ := cookiejar.New(nil)
	if status, page := consoleGet(t, &http.Client{Jar: other}, link); status != 401 || strings.Contains(page, "Sign out") || onceForm.MatchString(page) {
		t.Errorf("a second use of the link: %d", status)
	}
	for path, want := range map[string]string{
		"/threads/" + id: "author", "/workflows": "quick", "/workflows/quick": "one example turn",
		"/agents": "Capacity", "/queue": "Queue", "/usage": "quick", "/inbox": "Nothing waits for you",
	} {
		status, page := consoleGet(t, c, base+path)
		if status != 200 || !strings.Contains(page, want) {
			t.Errorf("%s: %d, want %q in:\n%s", path, status, want, page)
		}
	}
}

func TestConsoleBadInput(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"console", "--addr", "0.0.0.0:7780"},
		{"console", "--addr", "192.0.2.1:80"},
		{"console", "--addr", "nonsense"},
		{"console", "extra"},
	} {
		r := e.must(2, args...)
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("nerve %v: want a line and a hint, got:\n%s", args, r.stderr)
		}
	}
	if e.daemonPID() != 0 {
		t.Error("a refused console started the daemon")
	}
}

// The local console's inbox answers through the daemon's answer endpoint
// and its checks: a bad meta is shown beside its field and records
// nothing, a good answer moves the thread on, a second one is refused.
func TestConsoleLocalAnswer(t *testing.T) {
	e := newEnv(t)
	e.must(0, "workflow", "run", repoFile(t, "examples/release.yaml"), "--input", "version=1.2", "--detach")
	waitInbox(t, e, 1)
	c, base := signedInConsole(t, e)
	get := func(path string) (int, string) {
		t.Helper()
		return consoleGet(t, c, path)
	}
	if _, page := get(base + "/"); !strings.Contains(page, `<a href="/?status=waiting"><span class="status st-waiting">waiting</span> <b>1</b></a>`) {
		t.Errorf("the list should count the waiting thread:\n%s", page)
	}
	_, page := get(base + "/inbox")
	if !strings.Contains(page, "Approve the release notes of version 1.2") {
		t.Fatalf("the inbox lacks the turn:\n%s", page)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	answer := func(content, meta string) (int, string) {
		t.Helper()
		form := url.Values{"csrf": {csrf}, "thread": {"thread-1"}, "step": {"2"}, "content": {content}, "meta": {meta}}
		req, _ := http.NewRequest("POST", base+"/inbox/answer", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for meta, says := range map[string]string{`{"approved": "yes"}`: "want boolean", `{nope`: "not JSON", ``: "this role wants meta"} {
		status, page := answer("ship it", meta)
		i := strings.Index(page, `id="meta-error"`)
		if status != 400 || i < 0 || !strings.Contains(page[i:], says) {
			t.Errorf("meta %q: %d, want %q beside the field:\n%s", meta, status, says, page)
		}
	}
	if in := inboxOf(t, e); len(in.Waiting) != 1 {
		t.Fatalf("a refused answer changed the inbox: %+v", in)
	}
	if status, page := answer("ship it", `{"approved": true}`); status != 200 || !strings.Contains(page, "Answered thread-1") {
		t.Fatalf("a good answer: %d\n%s", status, page)
	}
	if r := e.must(0, "workflow", "logs", "release#thread-1", "-f"); !strings.Contains(r.stdout, "approver  answered by ") {
		t.Fatalf("the thread did not move on:\n%s", r)
	}
	if _, page := get(base + "/threads/thread-1"); !strings.Contains(page, "ship it") || !strings.Contains(page, "st-completed") {
		t.Errorf("the thread page after the answer:\n%s", page)
	}
	if status, page := answer("again", `{"approved": true}`); status != 400 || !strings.Contains(page, `id="answer-error"`) || !strings.Contains(page, "already ended") {
		t.Errorf("answered twice: %d\n%s", status, page)
	}
}

// `nerve khala serve` signs people in to its console with the token `nerve
// khala user add` printed, and `user remove` ends their session at once.
func TestConsoleKhalaPersonSession(t *testing.T) {
	k := startKhala(t)
	admin := newEnv(t)
	token := strings.TrimSpace(admin.must(0, "khala", "user", "add", "alice", "--db", k.db).stdout)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	send := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	signIn := func(tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", k.url+"/signin", nil)
		_, page := send(req)
		csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
		form := url.Values{"csrf": {csrf}, "token": {tok}}
		req, _ = http.NewRequest("POST", k.url+"/signin", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", k.url)
		return send(req)
	}
	if status, page := signIn(token + "x"); status != 401 || !strings.Contains(page, "unknown person token") {
		t.Errorf("a wrong token: %d\n%s", status, page)
	}
	if status, page := signIn(token); status != 200 || !strings.Contains(page, "Sign out") || !strings.Contains(page, "alice") {
		t.Fatalf("alice signs in: %d\n%s", status, page)
	}
	admin.must(0, "khala", "user", "remove", "alice", "--db", k.db)
	req, _ := http.NewRequest("GET", k.url+"/inbox", nil)
	if status, page := send(req); status != 401 || !strings.Contains(page, "alice was removed") {
		t.Errorf("a removed person's session: %d\n%s", status, page)
	}
}
