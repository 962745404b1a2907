package console

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
	"github.com/nerve-agents/nerve/workflow"
)

// inboxOnly answers the inbox and nothing else: the form's own behaviour
// (escaping, the field error, CSRF) and pages whose feature a source
// lacks. The real sources' inboxes are tested against Khala
// (khala/console_people_test.go, in a browser too) and the daemon
// (cmd/nerve/console_e2e_test.go).
type inboxOnly struct {
	answered []AnswerForm
}

func (s *inboxOnly) Inbox(context.Context, string) ([]InboxItem, error) {
	return []InboxItem{{Thread: "thread-7", Workflow: "release", Role: "approver", Step: 3,
		Instruction: `ship <b>1.2</b>?`, Meta: `{"type":"object","required":["ok"]}`}}, nil
}

func (s *inboxOnly) Answer(_ context.Context, person string, a AnswerForm) error {
	if !strings.Contains(a.Meta, `"ok"`) {
		return &FieldError{Field: "meta", Message: `missing property "ok" <required>`}
	}
	s.answered = append(s.answered, a)
	return nil
}

func (s *inboxOnly) Threads(context.Context, ThreadFilter) (*ThreadPage, error) {
	return nil, ErrNotAvailable
}
func (s *inboxOnly) Thread(context.Context, string) (*ThreadDetail, error) {
	return nil, ErrNotAvailable
}
func (s *inboxOnly) Follow(context.Context, string, uint64, func(workflow.Event) error) error {
	return ErrNotAvailable
}
func (s *inboxOnly) Workflows(context.Context) ([]Workflow, error) { return nil, ErrNotAvailable }
func (s *inboxOnly) Agents(context.Context) ([]Agent, error)       { return nil, ErrNotAvailable }
func (s *inboxOnly) Queue(context.Context) ([]QueuedTurn, error)   { return nil, ErrNotAvailable }
func (s *inboxOnly) Usage(context.Context, usage.Query) (*usage.Report, error) {
	return nil, ErrNotAvailable
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestInboxAnswerFormShowsTheFieldError(t *testing.T) {
	src := &inboxOnly{}
	c := New(Options{Source: src, Auth: func(_ context.Context, tok string) (string, error) {
		if tok == "person-token" {
			return "ada", nil
		}
		return "", errors.New("unknown token")
	}})
	do := func(req *http.Request, cookies []*http.Cookie) *httptest.ResponseRecorder {
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		return rec
	}
	form := func(path string, v url.Values, cookies []*http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://example.com") // httptest.NewRequest's host
		return do(req, cookies)
	}
	pre := do(httptest.NewRequest("GET", "/signin", nil), nil)
	tok := csrfRE.FindStringSubmatch(pre.Body.String())[1]
	in := form("/signin", url.Values{"csrf": {tok}, "token": {"person-token"}}, pre.Result().Cookies())
	if in.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", in.Code, in.Body)
	}
	session := in.Result().Cookies()
	page := do(httptest.NewRequest("GET", "/inbox", nil), session)
	body := page.Body.String()
	if page.Code != 200 || !strings.Contains(body, "ship &lt;b&gt;1.2&lt;/b&gt;?") {
		t.Fatalf("inbox: %d\n%s", page.Code, body)
	}
	csrf := csrfRE.FindStringSubmatch(body)[1]
	answer := url.Values{"csrf": {csrf}, "thread": {"thread-7"}, "step": {"3"}, "content": {"yes <i>ship</i>"}, "meta": {`{"nope": 1}`}}
	bad := form("/inbox/answer", answer, session)
	body = bad.Body.String()
	if bad.Code != 400 || !strings.Contains(body, `<p class="field-error" id="meta-error">missing property &#34;ok&#34; &lt;required&gt;</p>`) {
		t.Fatalf("a bad meta should be shown next to its field: %d\n%s", bad.Code, body)
	}
	if !strings.Contains(body, "yes &lt;i&gt;ship&lt;/i&gt;</textarea>") {
		t.Errorf("the answer typed should stay in the form:\n%s", body)
	}
	answer.Set("meta", `{"ok": true}`)
	if good := form("/inbox/answer", answer, session); good.Code != http.StatusSeeOther || len(src.answered) != 1 || src.answered[0].Step != 3 {
		t.Fatalf("a good answer: %d, answered %+v", good.Code, src.answered)
	}
	answer.Set("csrf", "stale")
	if stale := form("/inbox/answer", answer, session); stale.Code != 403 || len(src.answered) != 1 {
		t.Errorf("a stale CSRF token: %d", stale.Code)
	}
	// Pages whose feature the source lacks say what they will show.
	if rec := do(httptest.NewRequest("GET", "/", nil), session); rec.Code != http.StatusNotImplemented {
		t.Errorf("threads from a source without them: %d", rec.Code)
	}
	for _, p := range []string{"/agents", "/queue", "/usage"} {
		if rec := do(httptest.NewRequest("GET", p, nil), session); rec.Code != 200 || !strings.Contains(rec.Body.String(), `class="notyet"`) {
			t.Errorf("%s: %d\n%s", p, rec.Code, rec.Body)
		}
	}
}
