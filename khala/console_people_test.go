package khala

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// The console's inbox and answer form go through the API's own checks:
// answered_by, the role's meta schema, a turn answered once.
func TestConsoleInboxAndAnswer(t *testing.T) { eachBackend(t, testConsoleInboxAndAnswer) }

func testConsoleInboxAndAnswer(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("laptop")
	alice, carol := ts.person("alice"), ts.person("carol")
	a.putWorkflow(releaseWF)
	id := toApproval(t, a, "")
	ba, bc := newBrowser(t, ts.URL), newBrowser(t, ts.URL)
	if status, _ := ba.signIn(alice.token); status != 200 {
		t.Fatalf("alice signs in: %d", status)
	}
	bc.signIn(carol.token)

	_, page := ba.get("/")
	if !strings.Contains(page, `<a href="/?status=waiting"><span class="status st-waiting">waiting</span> <b>1</b></a>`) ||
		!strings.Contains(page, `<td><span class="status st-waiting">waiting</span></td>`) {
		t.Errorf("the list should count and mark the waiting thread:\n%s", page)
	}
	if _, page := ba.get("/?status=waiting"); !strings.Contains(page, `href="/threads/`+id+`"`) {
		t.Errorf("the waiting filter lacks %s:\n%s", id, page)
	}
	if _, page := ba.get("/?status=completed"); strings.Contains(page, `href="/threads/`+id+`"`) {
		t.Errorf("the completed filter lists the waiting %s", id)
	}
	_, inbox := ba.get("/inbox")
	if !strings.Contains(inbox, "approve v1.2") || !strings.Contains(inbox, `name="thread" value="`+id+`"`) {
		t.Fatalf("alice's inbox:\n%s", inbox)
	}
	if _, page := bc.get("/inbox"); !strings.Contains(page, "Nothing waits for you") {
		t.Errorf("carol is not in answered_by; her inbox:\n%s", page)
	}
	if _, page := ba.get("/threads/" + id); !strings.Contains(page, `id="waiting"`) || !strings.Contains(page, `name="from" value="thread"`) {
		t.Errorf("alice's thread page should have the form:\n%s", page)
	}
	if _, page := bc.get("/threads/" + id); !strings.Contains(page, "Not yours to answer") || strings.Contains(page, `name="from"`) {
		t.Errorf("carol's thread page should not have the form:\n%s", page)
	}

	answer := func(b *browser, content, meta string) (int, string) {
		t.Helper()
		_, page := b.get("/inbox")
		return b.post("/inbox/answer", ts.URL, url.Values{"csrf": {csrfOf(t, page)}, "thread": {id}, "step": {"2"},
			"content": {content}, "meta": {meta}, "from": {"thread"}})
	}
	for _, c := range []struct{ name, meta, says string }{
		{"meta of the wrong type", `{"approved": "yes"}`, "approved"},
		{"meta not JSON", `{"approved":`, "not JSON"},
		{"no meta", ``, "this role wants meta"},
	} {
		status, page := answer(ba, "ship it", c.meta)
		i := strings.Index(page, `<p class="field-error" id="meta-error">`)
		if status != 400 || i < 0 || !strings.Contains(page[i:], c.says) || !strings.Contains(page, "ship it</textarea>") {
			t.Errorf("%s: %d, want the error beside the meta field saying %q:\n%s", c.name, status, c.says, page)
		}
	}
	if status, page := answer(bc, "ship it", `{"approved": true}`); status != 400 || !strings.Contains(page, "carol may not answer") {
		t.Errorf("carol answers: %d\n%s", status, page)
	}
	// Signing in is not answering: a token with the console scope alone
	// is refused the answer, as the API's answer endpoint refuses it.
	u, err := ts.srv.users().Add(t.Context(), "vera", ScopeConsole)
	if err != nil {
		t.Fatal(err)
	}
	bv := newBrowser(t, ts.URL)
	if status, _ := bv.signIn(u.Token); status != 200 {
		t.Fatalf("vera signs in: %d", status)
	}
	if status, page := answer(bv, "ship it", `{"approved": true}`); status == 200 || !strings.Contains(page, "answer scope") {
		t.Errorf("vera, console scope only, answers: %d\n%s", status, page)
	}
	if th := a.thread(id); th.Status != workflow.StatusRunning || len(th.Waiting) != 1 {
		t.Fatalf("a refused answer recorded something: %s, waiting %+v", th.Status, th.Waiting)
	}
	status, page := answer(ba, "ship <b>it</b>", `{"approved": true}`)
	if status != 200 || !strings.Contains(page, "<h1>"+id) || !strings.Contains(page, "ship &lt;b&gt;it&lt;/b&gt;") {
		t.Fatalf("a good answer should land on the thread page showing it: %d\n%s", status, page)
	}
	if th := a.thread(id); th.Status != workflow.StatusCompleted || !strings.Contains(jsonString(th.Result), `"by":"alice"`) {
		t.Fatalf("the thread did not move on: %s %v", th.Status, th.Result)
	}
	if status, page := answer(ba, "again", `{"approved": true}`); status != 400 || !strings.Contains(page, `id="answer-error"`) ||
		!strings.Contains(page, "take no answers") {
		t.Errorf("answered twice: %d\n%s", status, page)
	}

	// A removed person's session ends at once, and adding them again
	// (a new token) does not bring the old session back.
	if err := ts.srv.users().Remove(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	ts.srv.users().Add(t.Context(), "alice")
	if status, page := ba.get("/inbox"); status != 401 || !strings.Contains(page, "alice was removed") || !strings.Contains(page, `action="/signin"`) {
		t.Errorf("a removed person's session: %d\n%s", status, page)
	}
	if status, _ := ba.get("/"); status != 200 {
		t.Errorf("after the session ended, / is the sign-in page: %d", status)
	}
	if status, _ := bc.get("/inbox"); status != 200 {
		t.Errorf("carol's session should live on: %d", status)
	}
}

// A parent's page lists its children by status, with links; a child's
// page links to its parent.
func TestConsoleChildren(t *testing.T) { eachBackend(t, testConsoleChildren) }

func testConsoleChildren(t *testing.T, bk backend) {
	ts := bk.server(t, withPerson)
	a := ts.agent("laptop")
	a.putWorkflow(reviewWF)
	a.putWorkflow(fanOutWF)
	id := a.start("fanout", nil, "")
	kids := a.children(id).kids
	b := newBrowser(t, ts.URL)
	b.signIn(testPerson)
	_, page := b.get("/threads/" + id)
	if !strings.Contains(page, `2 threads: <span class="status st-running">running</span> <b>2</b>`) ||
		!strings.Contains(page, `<a href="/threads/`+kids[0]+`">review#`+kids[0]+`</a>`) {
		t.Errorf("the parent's page should count and link its children:\n%s", page)
	}
	if _, page := b.get("/threads/" + kids[1]); !strings.Contains(page, `Child of <a href="/threads/`+id+`">`) {
		t.Errorf("the child's page should link its parent:\n%s", page)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The inbox shows a person what is meant for a person: the role's prompt
// and the turn's instruction, not the prompt composed for an agent (the
// fenced json block to end with, how to read the thread); so does the
// thread's page.
func TestConsoleInboxShowsThePersonsPrompt(t *testing.T) {
	ts := newTestServer(t)
	a := ts.agent("laptop")
	alice := ts.person("alice")
	a.putWorkflow(releaseWF)
	id := toApproval(t, a, "")
	b := newBrowser(t, ts.URL)
	b.signIn(alice.token)
	for _, path := range []string{"/inbox", "/threads/" + id} {
		_, page := b.get(path)
		for _, want := range []string{"Approve the release, or say what must change.", "approve v1.2"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks %q:\n%s", path, want, page)
			}
		}
		for _, agents := range []string{"fenced", "nerve thread messages", "You are approver"} {
			if strings.Contains(page, agents) {
				t.Errorf("%s shows the agent's text %q:\n%s", path, agents, page)
			}
		}
	}
}
