package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nerve-agents/nerve/internal/procstat"
	"github.com/nerve-agents/nerve/remote"
)

// inboxOf runs `nerve inbox --json`.
func inboxOf(t *testing.T, e *env) inboxJSON {
	t.Helper()
	r := e.must(0, "inbox", "--json")
	var in inboxJSON
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inbox --json: %v\n%s", err, r)
	}
	return in
}

// The keys of every turn `nerve inbox --json` lists, a local thread's or
// a remote's, and of every remote it could not read: each present, null
// when empty.
var (
	waitingKeys     = []string{"thread", "workflow", "ref", "turn", "step", "role", "prompt", "instruction", "answered_by", "meta_schema", "since"}
	unreachableKeys = []string{"remote", "error", "reason"}
)

// inboxTurns runs `nerve inbox --json` and returns its turns as decoded
// JSON objects, each checked to have exactly waitingKeys (and each remote
// it could not read, unreachableKeys).
func inboxTurns(t *testing.T, e *env) []map[string]any {
	t.Helper()
	r := e.must(0, "inbox", "--json")
	var in struct{ Waiting, Unreachable []map[string]any }
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inbox --json: %v\n%s", err, r)
	}
	checkKeys := func(objs []map[string]any, want []string) {
		for _, o := range objs {
			if keys := slices.Sorted(maps.Keys(o)); !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
				t.Fatalf("inbox --json: keys %v, want %v", keys, want)
			}
		}
	}
	checkKeys(in.Waiting, waitingKeys)
	checkKeys(in.Unreachable, unreachableKeys)
	return in.Waiting
}

func waitInbox(t *testing.T, e *env, n int) inboxJSON {
	t.Helper()
	var in inboxJSON
	waitFor(t, "the inbox to list the waiting turn", func() bool {
		in = inboxOf(t, e)
		return len(in.Waiting) == n
	})
	return in
}

// A local human turn waits in the inbox; bad answers are refused (exit 2)
// and change nothing; a rejection goes back to the author; an approval
// ends the thread; answering it again is refused.
func TestE2EHumanTurnLocal(t *testing.T) {
	e := newEnv(t)
	def := repoFile(t, "examples/release.yaml")
	e.must(0, "workflow", "run", def, "--input", "version=1.2", "--detach")
	in := waitInbox(t, e, 1)
	w := in.Waiting[0]
	if w.Ref != "release#thread-1" || w.Step != 2 || w.Role != "approver" || w.Meta == nil || len(in.Unreachable) != 0 {
		t.Fatalf("inbox: %+v", in)
	}
	// The shape and meaning of a remote turn's (TestE2EInboxRemotes): no
	// Khala turn id, anyone may answer, the prompt as composed for a turn.
	raw := inboxTurns(t, e)[0]
	if prompt, _ := raw["prompt"].(string); raw["turn"] != nil || raw["answered_by"] != nil ||
		!strings.Contains(prompt, "approve them") || w.Instruction == nil || !strings.Contains(prompt, *w.Instruction) || !strings.Contains(prompt, "release#thread-1") {
		t.Fatalf("a local turn in inbox --json: %v", raw)
	}
	logs := e.must(0, "workflow", "logs", "release#thread-1")
	want := `step 2  approver  waits for a person: nerve thread answer release#thread-1 "TEXT" --meta '{"approved": true}'`
	if !strings.Contains(logs.stdout, want) || !strings.Contains(logs.stdout, "waiting for a person") {
		t.Fatalf("logs do not say who answers and how:\n%s", logs)
	}

	for _, bad := range [][]string{
		{"thread", "answer", "release#thread-1", "ok"},                                  // the role wants meta
		{"thread", "answer", "release#thread-1", "ok", "--meta", `{"approved": "yes"}`}, // not the schema
		{"thread", "answer", "release#thread-1", "ok", "--meta", `{nope`},               // not JSON
		{"thread", "answer", "release#thread-1", "ok", "--meta", `[true]`},              // not an object
		{"thread", "answer", "release#thread-1", "ok", "--file", "x", "--meta", `{"approved": true}`},
		{"thread", "answer", "release#thread-1"},                                                      // empty
		{"thread", "answer", "release", "ok"},                                                         // no thread
		{"thread", "answer", "release#thread-9", "ok"},                                                // unknown thread
		{"thread", "answer", "release#thread-1", "ok", "--step", "1", "--meta", `{"approved": true}`}, // not waiting
	} {
		r := e.run(bad...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("nerve %v: want a one-line refusal, got %s", bad, r)
		}
	}
	if r := e.run("thread", "answer", "release#thread-1", "ok", "--meta", `{"approved": "yes"}`); r.code != 2 || !strings.Contains(r.stderr, "want boolean") {
		t.Fatalf("bad meta: %s", r)
	}
	if in := inboxOf(t, e); len(in.Waiting) != 1 {
		t.Fatalf("a refused answer changed the inbox: %+v", in)
	}

	e.must(0, "thread", "answer", "release#thread-1", "Say which bugs it fixes", "--meta", `{"approved": false}`)
	in = waitInbox(t, e, 1)
	if in.Waiting[0].Step != 4 {
		t.Fatalf("after a rejection the author goes again, then step 4 waits: %+v", in)
	}
	notes := filepath.Join(e.home, "ok.md")
	os.WriteFile(notes, []byte("Ship it\n"), 0o600)
	r := e.must(0, "thread", "answer", "release#thread-1", "--file", notes, "--meta", `{"approved": true}`, "--json")
	var res answerJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Step != 4 || res.Role != "approver" || res.By == "" {
		t.Fatalf("answer --json: %v %s", err, r)
	}
	// Without #THREAD, -f follows the workflow's newest thread.
	if r := e.must(0, "workflow", "logs", "release", "-f"); !strings.Contains(r.stdout, "step 4  approver  answered by "+res.By) ||
		!strings.Contains(r.stderr, "following release#thread-1, the newest thread of release") {
		t.Fatalf("the log does not show who approved:\n%s", r)
	}
	if m := e.must(0, "thread", "messages", "release#thread-1", "--step", "4", "--json"); !strings.Contains(m.stdout, `"agent":"`+res.By+`"`) || !strings.Contains(m.stdout, `"approved":true`) {
		t.Fatalf("step 4's message: %s", m)
	}
	if r := e.run("thread", "answer", "release#thread-1", "again", "--meta", `{"approved": true}`); r.code != 1 || !strings.Contains(r.stderr, "already ended") {
		t.Fatalf("answering an ended thread: %s", r)
	}
}

// An agent never approves its own work: an answer sent from inside a
// running turn (its process group) is refused; the same answer from the
// person's terminal is taken.
func TestE2EAnswerFromInsideTurnRefused(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("the guard without the wall: its agent answers through nerve.sock and reports in NERVE_HOME")
	e.write("agent.sh", `#!/bin/sh
nerve thread answer "$NERVE_THREAD" "approved by me" --step 1 --meta '{"approved": true}' >"$NERVE_HOME/sneak.out" 2>"$NERVE_HOME/sneak.err"
echo $? >"$NERVE_HOME/sneak.code"
sh -c 'nerve thread answer "$NERVE_THREAD" "from a grandchild" --step 1 --meta "{\"approved\": true}"' 2>"$NERVE_HOME/sneak2.err"
echo "tried"
`)
	e.write("nerve.yaml", "adapters:\n  sneaky:\n    type: exec\n    command: ["+e.home+"/agent.sh]\n")
	def := e.write("approve.yaml", approveWhileWorking)
	e.must(0, "workflow", "run", def, "--detach")
	waitFor(t, "the agent to try to answer", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.home, "sneak2.err"))
		return len(b) > 0
	})
	code, _ := os.ReadFile(filepath.Join(e.home, "sneak.code"))
	stderr, _ := os.ReadFile(filepath.Join(e.home, "sneak.err"))
	if strings.TrimSpace(string(code)) != "1" || !strings.Contains(string(stderr), "an agent never approves its own work") {
		t.Fatalf("an answer from inside the turn: exit %s, stderr %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "sneak2.err")); !strings.Contains(string(b), "never approves its own work") {
		t.Fatalf("an answer from the turn's grandchild: %s", b)
	}
	waitInbox(t, e, 1)
	e.must(0, "thread", "answer", "approve#thread-1", "yes", "--step", "1", "--meta", `{"approved": true}`)
	e.must(0, "workflow", "logs", "approve#thread-1", "-f")
}

// A human turn survives kill -9 of the daemon: after the restart it still
// waits, and an answer given then completes the thread.
func TestE2EHumanTurnSurvivesKill9(t *testing.T) {
	e := newEnv(t)
	e.must(0, "workflow", "run", repoFile(t, "examples/release.yaml"), "--input", "version=2.0", "--detach")
	waitInbox(t, e, 1)
	pid := e.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return procstat.Exited(pid) })
	// The answer starts a new daemon; it is recorded whether or not the
	// resumed thread's turn is waiting yet.
	e.must(0, "thread", "answer", "release#thread-1", "ok", "--meta", `{"approved": true}`)
	r := e.must(0, "workflow", "logs", "release#thread-1", "-f")
	if !strings.Contains(r.stdout, "resumed at step 2") || !strings.Contains(r.stdout, "thread-1 completed") {
		t.Fatalf("logs after the restart:\n%s", r)
	}
}

// A turn without an instruction has "instruction": null in inbox --json,
// as every empty key of a --json shape (it was "").
func TestE2EInboxEmptyInstructionIsNull(t *testing.T) {
	e := newEnv(t)
	asks := e.write("asks.yaml", "workflow: asks\nmoderator: 'last = null ? {\"role\": \"approver\"} : {\"done\": true}'\n"+
		"roles: {approver: {human: true, prompt: Approve.}}\n")
	e.must(0, "workflow", "run", asks, "--detach")
	waitInbox(t, e, 1)
	if raw := inboxTurns(t, e)[0]; raw["instruction"] != nil || !strings.Contains(raw["prompt"].(string), "Approve.") {
		t.Fatalf("a turn without an instruction in inbox --json: %v", raw)
	}
}

// `nerve inbox` asks every remote with the person's token: a live one's
// waiting turn is listed (and answered with `nerve thread answer`, as the
// person), a dead one is marked unreachable, one without a person token
// says how to add it (a command that works as written), one that refuses
// the token says so.
func TestE2EInboxRemotes(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	tok := strings.TrimSpace(e.must(0, "khala", "user", "add", "alice", "--db", k.db).stdout)
	waitingTurn(t, k)
	e.write("nerve.yaml", "remotes:\n  live: {url: \""+k.url+"\"}\n  dead: {url: \"http://127.0.0.1:1\"}\n  anon: {url: \""+k.url+"\"}\n  forged: {url: \""+k.url+"\"}\n")
	if err := remote.SavePersonToken(e.home, "live", tok); err != nil {
		t.Fatal(err)
	}
	remote.SavePersonToken(e.home, "dead", tok)
	remote.SavePersonToken(e.home, "forged", "khala_person_forged")
	in := inboxOf(t, e)
	if len(in.Waiting) != 1 || in.Waiting[0].Ref != "live/approval#thread-1" || in.Waiting[0].Turn == nil || len(in.Unreachable) != 3 {
		t.Fatalf("inbox: %+v", in)
	}
	if raw := inboxTurns(t, e)[0]; raw["turn"] != "thread-1.1" || raw["answered_by"] != nil || !strings.Contains(raw["prompt"].(string), "approve") {
		t.Fatalf("a remote turn in inbox --json: %v", raw)
	}
	// A script tells a remote it cannot reach from one that wants a token.
	var reasons []string
	for _, u := range in.Unreachable {
		reasons = append(reasons, u.Remote+": "+u.Reason)
	}
	if got := strings.Join(reasons, ", "); got != "anon: no_person_token, dead: unreachable, forged: person_token_refused" {
		t.Fatalf("inbox --json unreachable reasons: %s", got)
	}
	human := e.must(0, "inbox")
	store := "nerve init --remote anon=" + k.url + " --person-token T"
	for _, want := range []string{"live/approval#thread-1", "dead: unreachable:", "anon: no person token for anon: store yours with '" + store + "'",
		"forged: the person token was refused (unknown, or the person was removed): store a new one with 'nerve init --remote forged="} {
		if !strings.Contains(human.stdout, want) {
			t.Fatalf("inbox does not show %q:\n%s", want, human)
		}
	}
	if r := e.run("thread", "answer", "anon/approval#thread-1", "ok"); r.code == 0 {
		t.Fatalf("answered without a person token: %s", r)
	}
	if r := e.must(2, "thread", "answer", "live/approval#thread-1", "ok", "--step", "-1"); !strings.Contains(r.stderr, "--step takes a positive number") {
		t.Fatalf("a negative --step: %s", r)
	}
	r := e.must(0, "thread", "answer", "live/approval#thread-1", "ok", "--json")
	var res answerJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.By != "alice" || res.Step != 1 {
		t.Fatalf("answer --json on a remote: %v %s", err, r)
	}
	if r := e.run("thread", "answer", "live/approval#thread-1", "again"); r.code != 1 {
		t.Fatalf("answering twice: %s", r)
	}
	if in := inboxOf(t, e); len(in.Waiting) != 0 {
		t.Fatalf("answered, still in the inbox: %+v", in)
	}
	if r := e.must(2, "workflow", "logs", "live/nosuch"); !strings.Contains(r.stderr, `unknown workflow "nosuch"`) {
		t.Fatalf("threads of a workflow the remote does not have: %s", r)
	}
	// The hint's command, as written (with the token for T), stores it.
	e.must(0, strings.Fields(strings.TrimPrefix(strings.Replace(store, " T", " "+tok, 1), "nerve "))...)
	if human := e.must(0, "inbox"); strings.Contains(human.stdout, "anon:") {
		t.Fatalf("the hint's command stored no token for anon:\n%s", human)
	}
}
