package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/remote"
	"github.com/nerve-agents/nerve/workflow"
)

const releaseCloudWF = `workflow: release
binding: cloud
moderator: |
  $count(messages) = 0 ? {"role": "author", "instruction": "write the notes"}
  : $count(messages) = 1 ? {"role": "approver", "instruction": "approve: " & last.content}
  : {"done": true, "result": {"approved": last.meta.approved, "by": last.agent}}
roles:
  author: {prompt: You write release notes.}
  approver:
    human: true
    answered_by: [alice]
    prompt: Approve the release.
    meta: {type: object, required: [approved], properties: {approved: {type: boolean}}}
`

const reviewCloudWF = `workflow: review
binding: cloud
inputs:
  item: {type: string}
moderator: |
  $count(messages) = 0 ? {"role": "reviewer", "instruction": "review " & input.item}
  : {"done": true, "result": last.content}
roles:
  reviewer: {prompt: You review one item.}
`

const fanOutCloudWF = `workflow: fanout
binding: cloud
moderator: |
  $count(messages) = 0
    ? [{"workflow": "review", "input": {"item": "a"}}, {"workflow": "review", "input": {"item": "b"}}]
    : {"done": true, "result": messages.{"child": child, "content": content}}
roles:
  unused: {prompt: never asked.}
`

const delegateCloudWF = `workflow: delegate
binding: cloud
moderator: |
  $count(messages) = 0 ? {"role": "delegator", "instruction": "hand part of it on"} : {"done": true, "result": last.content}
roles:
  delegator: {prompt: You delegate.}
`

// People on a real Khala: `nerve khala user add` while the server runs, a
// cloud workflow whose human approval a real daemon's agent never takes,
// answered over HTTP with the person's token and through the remote
// client; and a child workflow served by the same daemon.
func TestE2EKhalaPeopleAndChildren(t *testing.T) {
	k := startKhala(t)
	admin := newEnv(t)
	bad := admin.must(2, "khala", "user", "add", "Alice", "--db", k.db)
	if !strings.Contains(bad.stderr, "person name") {
		t.Fatalf("a bad name: %s", bad)
	}
	alice := strings.TrimSpace(admin.must(0, "khala", "user", "add", "alice", "--db", k.db).stdout)
	if !strings.HasPrefix(alice, "khala_person_") {
		t.Fatalf("token: %q", alice)
	}
	if r := admin.must(1, "khala", "user", "add", "alice", "--db", k.db); !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("alice twice: %s", r)
	}
	list := admin.must(0, "khala", "user", "list", "--json", "--db", k.db)
	var people []map[string]any
	if err := json.Unmarshal([]byte(list.stdout), &people); err != nil || len(people) != 1 || people[0]["name"] != "alice" {
		t.Fatalf("user list: %s", list)
	}
	if strings.Contains(list.stdout, "token") {
		t.Fatalf("user list shows a token: %s", list)
	}

	script := `if [ "$NERVE_ROLE" = delegator ]; then nerve workflow run origin/review -i item=sub -d; fi
echo "done $NERVE_ROLE"`
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", script, "", 2)
	a.unsandboxed("its agent starts a child through nerve.sock")
	for name, src := range map[string]string{"release": releaseCloudWF, "review": reviewCloudWF, "fanout": fanOutCloudWF, "delegate": delegateCloudWF} {
		a.must(0, "workflow", "push", a.write(name+".yaml", src), "origin")
	}
	a.must(0, "daemon", "start")
	agentTok, _ := os.ReadFile(filepath.Join(a.home, "tokens", "origin"))

	// The person stores their token with init: 0600, never in nerve.yaml.
	p := newEnv(t)
	if r := p.must(1, "init", "--remote", "origin="+k.url, "--person-token", strings.TrimSpace(string(agentTok))); !strings.Contains(r.stderr, "agent's token") {
		t.Fatalf("an agent's token as a person's: %s", r)
	}
	if r := p.must(1, "init", "--remote", "origin="+k.url, "--person-token", "khala_person_forged"); !strings.Contains(r.stderr, "refused the person token") {
		t.Fatalf("a forged person token: %s", r)
	}
	p.must(0, "init", "--remote", "origin="+k.url, "--person-token", alice)
	fi, err := os.Stat(filepath.Join(p.home, "person-tokens", "origin"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("person token file: %v %v", fi, err)
	}
	if cfg, _ := os.ReadFile(filepath.Join(p.home, "nerve.yaml")); strings.Contains(string(cfg), alice) {
		t.Fatal("the person token is in nerve.yaml")
	}

	ref := strings.TrimSpace(a.must(0, "workflow", "run", "origin/release", "-d").stdout)
	id := ref[strings.Index(ref, "#")+1:]
	asAlice := &remote.Client{Name: "origin", BaseURL: k.url, PersonToken: alice, HTTP: http.DefaultClient, Timeout: 5 * time.Second}
	ctx := context.Background()
	var inbox []workflow.Waiting
	waitFor(t, "the approval to wait for alice", func() bool {
		inbox, err = asAlice.Inbox(ctx)
		return err == nil && len(inbox) == 1
	})
	if inbox[0].Thread != id || inbox[0].Turn != id+".2" || inbox[0].Instruction != "approve: done author" {
		t.Fatalf("inbox: %+v", inbox)
	}
	agent := &remote.Client{Name: "origin", BaseURL: k.url, Token: strings.TrimSpace(string(agentTok)), HTTP: http.DefaultClient, Timeout: 5 * time.Second}
	if _, err := agent.Answer(ctx, id, id+".2", workflow.Answer{Content: "ok", Meta: map[string]any{"approved": true}}); !remote.IsForbidden(err) {
		t.Fatalf("an agent answering: %v", err)
	}
	if _, err := asAlice.Answer(ctx, id, id+".2", workflow.Answer{Content: "ok", Meta: map[string]any{"approved": "yes"}}); !remote.IsStatus(err, 400) {
		t.Fatalf("bad meta: %v", err)
	}
	if _, err := asAlice.Answer(ctx, id, id+".2", workflow.Answer{Content: "ship it", Meta: map[string]any{"approved": true}}); err != nil {
		t.Fatalf("alice's answer: %v", err)
	}
	th, err := agent.Thread(ctx, id)
	if err != nil || th.Status != workflow.StatusCompleted {
		t.Fatalf("after the answer: %+v %v", th, err)
	}
	if res, _ := th.Result.(map[string]any); res["by"] != "alice" || res["approved"] != true {
		t.Fatalf("result: %#v", th.Result)
	}

	// A second approval, answered with plain HTTP (as curl would).
	ref2 := strings.TrimSpace(a.must(0, "workflow", "run", "origin/release", "-d").stdout)
	id2 := ref2[strings.Index(ref2, "#")+1:]
	waitFor(t, "the second approval", func() bool {
		th, err := agent.Thread(ctx, id2)
		return err == nil && len(th.Waiting) == 1
	})
	body := strings.NewReader(`{"content": "no", "meta": {"approved": false}}`)
	req, _ := http.NewRequest("POST", k.url+"/v1/threads/"+id2+"/turns/"+id2+".2/answer", body)
	req.Header.Set("Authorization", "Bearer "+alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("answer over HTTP: %v %v", resp, err)
	}
	resp.Body.Close()

	// A third, answered with the CLI by the person's NERVE_HOME.
	ref3 := strings.TrimSpace(a.must(0, "workflow", "run", "origin/release", "-d").stdout)
	waitFor(t, "the third approval", func() bool {
		return strings.Contains(p.run("inbox", "--json").stdout, ref3)
	})
	if r := p.run("thread", "answer", ref3, "not yet", "--meta", `{"approved": "maybe"}`); r.code != 2 {
		t.Fatalf("a bad meta through the CLI: %s", r)
	}
	p.must(0, "thread", "answer", ref3, "fine", "--meta", `{"approved": true}`)
	if r := p.run("thread", "answer", ref3, "again", "--meta", `{"approved": true}`); r.code == 0 {
		t.Fatalf("answering twice through the CLI: %s", r)
	}

	// Removing alice stops her token at once.
	admin.must(0, "khala", "user", "remove", "alice", "--db", k.db)
	if _, err := asAlice.Inbox(ctx); !remote.IsStatus(err, 401) {
		t.Fatalf("a removed person's inbox: %v", err)
	}

	// A child workflow on Khala: the moderator starts two reviews; the
	// daemon's agent answers their turns; their results come back.
	r := a.must(0, "workflow", "run", "origin/fanout", "--json")
	out := decodeRun(t, r)
	if out.Status != "completed" {
		t.Fatalf("fan-out: %s", r)
	}
	res, _ := json.Marshal(out.Result)
	if strings.Count(string(res), `"child":"review#thread-`) != 2 || strings.Count(string(res), "done reviewer") != 2 {
		t.Fatalf("fan-out result: %s", res)
	}

	// An agent inside a turn starts a child of its turn's thread.
	out = decodeRun(t, a.must(0, "workflow", "run", "origin/delegate", "--json"))
	del, err := agent.Thread(ctx, out.Thread[strings.Index(out.Thread, "#")+1:])
	if err != nil || del.Children == nil || len(del.Children.Refs) != 1 {
		t.Fatalf("the delegating thread's children: %+v %v", del, err)
	}
	kidRef := del.Children.Refs[0]
	kid, err := agent.Thread(ctx, kidRef[strings.Index(kidRef, "#")+1:])
	if err != nil || kid.Parent == nil || kid.Parent.Thread != del.ID || kid.Depth != 1 {
		t.Fatalf("the agent's child: %+v %v", kid, err)
	}
}
