package remote

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/khala"
	"github.com/nerve-agents/nerve/khala/api"
	"github.com/nerve-agents/nerve/khala/khaladb/khalabolt"
	"github.com/nerve-agents/nerve/workflow"
)

const approvalWF = `workflow: approval
binding: cloud
moderator: |
  $count(messages) = 0 ? {"role": "approver", "instruction": "approve"} : {"done": true, "result": last.meta}
roles:
  approver:
    human: true
    prompt: Approve it.
    meta: {type: object, required: [ok], properties: {ok: {type: boolean}}}
`

type testConfig struct{ url, home string }

func (c testConfig) RemoteURL(string) (string, bool) { return c.url, true }
func (c testConfig) NerveHome() string               { return c.home }

// A client made for a remote carries the person token stored for it, and
// answers and reads its inbox with it, against a real Khala server.
func TestPersonTokenAnswers(t *testing.T) {
	st, err := khalabolt.Open(filepath.Join(t.TempDir(), "k.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := khala.New(khala.Options{Store: st})
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); st.Close() }()
	ctx := context.Background()
	et, err := khala.IssueEnrollToken(ctx, st, 1, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	agentTok, err := New("origin", hs.URL, "").Enroll(ctx, et.Token, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	person, err := khala.Users{Store: st, Now: time.Now}.Add(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := SaveToken(home, "origin", agentTok); err != nil {
		t.Fatal(err)
	}
	if err := SavePersonToken(home, "origin", person.Token); err != nil {
		t.Fatal(err)
	}
	c, err := ForConfig(testConfig{hs.URL, home}, "origin")
	if err != nil || c.PersonToken != person.Token || c.Token != agentTok {
		t.Fatalf("client: %+v %v", c, err)
	}
	if _, err := c.PutWorkflow(ctx, "approval", []byte(approvalWF)); err != nil {
		t.Fatal(err)
	}
	id, err := c.Start(ctx, "approval", api.StartThread{})
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := c.Inbox(ctx)
	if err != nil || len(inbox) != 1 || inbox[0].Turn != id+".1" {
		t.Fatalf("inbox: %+v %v", inbox, err)
	}
	agentOnly := New("origin", hs.URL, agentTok)
	if _, err := agentOnly.Answer(ctx, id, id+".1", workflow.Answer{Meta: map[string]any{"ok": true}}); !IsForbidden(err) {
		t.Fatalf("an agent's answer: %v", err)
	}
	if by, err := c.Answer(ctx, id, id+".1", workflow.Answer{Content: "yes", Meta: map[string]any{"ok": true}}); err != nil || by != "alice" {
		t.Fatalf("answer: by %q, %v", by, err)
	}
	th, err := c.Thread(ctx, id)
	if err != nil || th.Status != workflow.StatusCompleted {
		t.Fatalf("thread: %+v %v", th, err)
	}
	// A child started by an agent inside a turn of a running thread.
	running, _ := c.Start(ctx, "approval", api.StartThread{})
	child, err := c.Start(ctx, "approval", api.StartThread{Parent: &api.StartParent{Thread: running, Turn: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if th, err := c.Thread(ctx, child); err != nil || th.Parent == nil || th.Parent.Thread != running || th.Depth != 1 {
		t.Fatalf("child: %+v %v", th, err)
	}

	chmod(t, filepath.Join(home, "person-tokens", "origin"), 0o644)
	if _, err := ForConfig(testConfig{hs.URL, home}, "origin"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a readable person token must be refused: %v", err)
	}
	if err := RemovePersonToken(home, "origin"); err != nil {
		t.Fatal(err)
	}
	if tok, err := LoadPersonToken(home, "origin"); tok != "" || err != nil {
		t.Fatalf("after remove: %q %v", tok, err)
	}
}
