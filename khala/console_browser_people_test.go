package khala

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/nerve-agents/nerve/workflow"
)

// TestConsoleAnswerInBrowser: a person signs in, opens the inbox and
// answers a human turn through the form, first with meta that does not
// fit the role's schema (the error beside the field, nothing recorded),
// then with meta that does; the thread moves on and its page shows the
// answer.
func TestConsoleAnswerInBrowser(t *testing.T) {
	ctx := newChrome(t)
	ts := newTestServer(t)
	a := ts.agent("laptop")
	alice := ts.person("alice")
	a.putWorkflow(releaseWF)
	id := toApproval(t, a, "")
	meta, content := css("#meta-"+id+"-2"), css("#content-"+id+"-2")
	submit := css(`form.answer button`)

	run(t, ctx, "sign in", signInActions(ts.URL, alice.token))
	run(t, ctx, "see the waiting count", chromedp.WaitVisible(chromedp.Search(`//ul[@id="counts"]//a[contains(@href, "waiting")]/b[text()="1"]`)))
	run(t, ctx, "open the inbox", chromedp.Navigate(ts.URL+"/inbox"), chromedp.WaitVisible(meta))
	if text := get(t, ctx, "read the item", chromedp.Text(css("main"))); !strings.Contains(text, "approve v1.2") {
		t.Fatalf("the inbox lacks the turn:\n%s", text)
	}
	run(t, ctx, "answer with bad meta", chromedp.SendKeys(content, "ship it"), chromedp.SendKeys(meta, `{"approved": "yes"}`),
		chromedp.Click(submit), chromedp.WaitVisible(css("#meta-error")))
	if text := get(t, ctx, "read the error", chromedp.Text(css("#meta-error"))); !strings.Contains(text, "approved") {
		t.Errorf("the meta error: %q", text)
	}
	if kept := get(t, ctx, "read the answer kept", chromedp.Value(content)); kept != "ship it" {
		t.Errorf("the form lost the answer typed: %q", kept)
	}
	if th := a.thread(id); th.Status != workflow.StatusRunning || len(th.Waiting) != 1 {
		t.Fatalf("a bad answer recorded something: %s, waiting %d", th.Status, len(th.Waiting))
	}
	run(t, ctx, "answer again", chromedp.SetValue(meta, `{"approved": true}`), chromedp.Click(submit),
		chromedp.WaitVisible(css(`p.ok`)))
	if text := get(t, ctx, "read the inbox", chromedp.Text(css("main"))); !strings.Contains(text, "Answered "+id) ||
		!strings.Contains(text, "Nothing waits for you") {
		t.Errorf("the inbox after answering:\n%s", text)
	}
	run(t, ctx, "open the thread", chromedp.Navigate(ts.URL+"/threads/"+id), chromedp.WaitVisible(css("#step-2")))
	msg := get(t, ctx, "read the answer", chromedp.Text(css("#step-2")))
	summary := get(t, ctx, "read the status", chromedp.Text(css("#summary")))
	if !strings.Contains(msg, "ship it") || !strings.Contains(msg, "alice") || !strings.Contains(summary, "completed") {
		t.Errorf("the thread page after the answer: %q / %q", msg, summary)
	}
	if th := a.thread(id); th.Status != workflow.StatusCompleted {
		t.Errorf("the thread did not move on: %s", th.Status)
	}
}
