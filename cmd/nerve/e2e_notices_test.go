package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/remote"
)

// noticeKeys are the keys of a notice in `nerve inbox --json`, each present.
var noticeKeys = []string{"thread", "workflow", "ref", "step", "role", "agent", "level", "message", "since"}

// noticeWF holds its first turn (holdScript) and then waits for a person:
// the next turn after the holder's starts as soon as the holder answers.
const noticeWF = `workflow: notehold
binding: BINDING
moderator: 'last = null ? {"role": "holder"} : last.role = "holder" ? {"role": "approver", "instruction": "go on?"} : {"done": true, "result": last.content}'
roles:
  holder: {adapter: ADAPTER, prompt: hold}
  approver: {human: true, prompt: Say whether to go on.}
`

// inboxNotices runs `nerve inbox --json` and returns its notices, each
// checked to have exactly noticeKeys, and how many turns wait.
func inboxNotices(t *testing.T, e *env) ([]map[string]any, int) {
	t.Helper()
	r := e.must(0, "inbox", "--json")
	var in struct{ Waiting, Notices []map[string]any }
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.Notices == nil {
		t.Fatalf("inbox --json: %v, want a notices list\n%s", err, r)
	}
	for _, n := range in.Notices {
		if keys := slices.Sorted(maps.Keys(n)); !slices.Equal(keys, slices.Sorted(slices.Values(noticeKeys))) {
			t.Fatalf("inbox --json notice keys %v, want %v", keys, noticeKeys)
		}
	}
	return in.Notices, len(in.Waiting)
}

// checkNotice checks the inbox lists the holder's blocking notice of ref
// (JSON and table), and not its info notice.
func checkNotice(t *testing.T, e *env, ref string) {
	t.Helper()
	ns, _ := inboxNotices(t, e)
	if len(ns) != 1 || ns[0]["ref"] != ref || ns[0]["step"] != float64(1) || ns[0]["role"] != "holder" ||
		ns[0]["level"] != "blocking" || ns[0]["message"] != "I need the staging password" {
		t.Fatalf("inbox --json notices: %v, want the holder's blocking notice of %s", ns, ref)
	}
	out := e.must(0, "inbox").stdout
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, "I need the staging password") {
			row = strings.Fields(l)
		}
	}
	if len(row) < 5 || row[0] != ref || row[1] != "1" || row[2] != "holder" || row[3] != "notice" ||
		strings.Contains(out, "just so you know") || strings.Contains(out, "nothing waits for a person") ||
		!strings.Contains(out, "read a notice's thread with: nerve workflow logs "+ref) {
		t.Fatalf("nerve inbox should list the notice as a row (%q):\n%s", row, out)
	}
}

// noticeGone releases the holder and checks the notice leaves the inbox
// once the next turn (the person's) has started.
func noticeGone(t *testing.T, holder, person *env) {
	t.Helper()
	holder.write("release", "")
	var waiting int
	waitFor(t, "the person's turn", func() bool { _, waiting = inboxNotices(t, person); return waiting == 1 })
	if ns, _ := inboxNotices(t, person); len(ns) != 0 {
		t.Fatalf("the next turn started and the notice is still listed: %v", ns)
	}
}

// A blocking notice (MCP notify) of a local thread is in `nerve inbox`
// and the console's inbox until the thread's next turn starts.
func TestE2EBlockingNoticeInInboxLocal(t *testing.T) {
	e := newEnv(t)
	e.unsandboxed("its agent hands its environment to the test through NERVE_HOME, for an MCP session of the turn's")
	e.write("hold.sh", "#!/bin/sh\n"+holdScript)
	e.write("nerve.yaml", fmt.Sprintf("adapters:\n  hold: {type: exec, command: [%s/hold.sh], timeout: 90s}\n", e.home))
	e.write("workflows/notehold.yaml", strings.NewReplacer("BINDING", "local", "ADAPTER", "hold").Replace(noticeWF))
	ref := strings.TrimSpace(e.must(0, "workflow", "run", "notehold", "--detach").stdout)
	cs := mcpSession(t, e.home, turnEnv(t, e))
	if ns, _ := inboxNotices(t, e); len(ns) != 0 {
		t.Fatalf("notices before any: %v", ns)
	}
	call(t, cs, "notify", map[string]any{"level": "info", "message": "just so you know"}, false)
	call(t, cs, "notify", map[string]any{"level": "blocking", "message": "I need the staging password"}, false)
	checkNotice(t, e, ref)

	c, base := signedInConsole(t, e)
	if _, page := consoleGet(t, c, base+"/inbox"); !strings.Contains(page, `id="notice-thread-1-1"`) ||
		!strings.Contains(page, "I need the staging password") || strings.Contains(page, "Nothing waits for you") {
		t.Fatalf("the console's inbox lacks the notice:\n%s", page)
	}
	noticeGone(t, e, e)
	if _, page := consoleGet(t, c, base+"/inbox"); strings.Contains(page, "I need the staging password") {
		t.Fatalf("the console's inbox keeps the notice after the next turn started:\n%s", page)
	}
}

// A blocking notice of a remote thread, sent from inside the turn an
// agent's daemon runs for it, is in a person's `nerve inbox` (their
// remote's) until the thread's next turn starts.
func TestE2EBlockingNoticeInInboxRemote(t *testing.T) {
	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-n", holdScript, "", 1)
	a.unsandboxed("its agent hands its environment to the test through NERVE_HOME, for an MCP session of the turn's")
	a.must(0, "workflow", "push", a.write("notehold.yaml", strings.NewReplacer("BINDING", "cloud", "ADAPTER", "x").Replace(noticeWF)), "origin")
	a.must(0, "daemon", "start")
	p := newEnv(t)
	tok := strings.TrimSpace(p.must(0, "khala", "user", "add", "alice", "--db", k.db).stdout)
	p.write("nerve.yaml", "remotes:\n  origin: {url: \""+k.url+"\"}\n")
	if err := remote.SavePersonToken(p.home, "origin", tok); err != nil {
		t.Fatal(err)
	}

	ref := strings.TrimSpace(a.must(0, "workflow", "run", "origin/notehold", "--detach").stdout)
	cs := mcpSession(t, a.home, turnEnv(t, a))
	call(t, cs, "notify", map[string]any{"level": "info", "message": "just so you know"}, false)
	call(t, cs, "notify", map[string]any{"level": "blocking", "message": "I need the staging password"}, false)
	checkNotice(t, p, ref)
	noticeGone(t, a, p)
}
