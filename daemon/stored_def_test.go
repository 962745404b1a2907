package daemon

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/workflow"
)

// oldDefinition was accepted before 0 as a limit and an input default of
// another type were refused: a thread started under it is stored with it.
const oldDefinition = `workflow: old
moderator: '$count(messages) = 0 ? {"role": "boss", "instruction": "ship?"} : {"done": true, "result": last.content}'
inputs:
  n: {type: integer, default: abc}
roles:
  boss: {human: true, prompt: decide}
limits: {max_steps: 0, claim: 0s, max_attempts: 0}
`

// A running thread whose stored definition the checks of today refuse
// resumes on restart, and its human turn takes an answer: the old 0s mean
// the defaults, as they did when the thread started.
func TestThreadUnderAnOldDefinitionResumesAndIsAnswered(t *testing.T) {
	if _, err := workflow.Parse("old.yaml", []byte(oldDefinition), nil); err == nil {
		t.Fatal("the definition passes today's checks: the test proves nothing")
	}
	home := t.TempDir()
	d, _ := newGatedDaemon(t, config.Defaults(home))
	th := &workflow.Thread{Workflow: "old", Status: workflow.StatusRunning, Workdir: home, Input: map[string]any{"n": "abc"},
		Source: []byte(oldDefinition)}
	if err := d.store.CreateThread(th); err != nil {
		t.Fatal(err)
	}
	d.runner.resumeAll()
	waitUntil(t, "the resumed thread to wait for its person", func() bool {
		got, err := d.store.Thread(th.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Ended() {
			t.Fatalf("the thread ended %s: %s", got.Status, got.Error)
		}
		return len(got.Pending) == 1
	})

	rec := httptest.NewRecorder()
	d.routes().ServeHTTP(rec, httptest.NewRequest("POST", "http://"+apiHost+"/v1/threads/"+th.ID+"/answer",
		strings.NewReader(`{"content": "yes"}`)))
	if rec.Code != http.StatusOK {
		t.Fatalf("answer: %d %s", rec.Code, rec.Body)
	}
	waitUntil(t, "the thread to complete", func() bool {
		got, _ := d.store.Thread(th.ID)
		return got.Ended()
	})
	if got, _ := d.store.Thread(th.ID); got.Status != workflow.StatusCompleted || got.Result != "yes" {
		t.Fatalf("thread %s, result %v, error %q: want completed with yes", got.Status, got.Result, got.Error)
	}
}
