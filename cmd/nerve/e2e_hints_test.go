package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wantOutput fails unless r exited with code and printed exactly stdout
// and stderr.
func wantOutput(t *testing.T, what string, r result, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || r.stdout != stdout || r.stderr != stderr {
		t.Fatalf("%s: want exit %d\nstdout: %q\nstderr: %q\ngot %s", what, code, stdout, stderr, r)
	}
}

// Without a nerve.yaml, validate says the defaults were checked, not
// that a file is valid.
func TestE2EValidateWithoutNerveYAML(t *testing.T) {
	e := newEnv(t)
	wantOutput(t, "validate", e.run("validate"), 0,
		"no nerve.yaml at "+filepath.Join(e.home, "nerve.yaml")+": the defaults apply ('nerve init' writes one)\n✓ the defaults and 0 workflow(s) are valid\n", "")
	e.write("nerve.yaml", "agent: {name: n1}\n")
	wantOutput(t, "validate with a nerve.yaml", e.run("validate"), 0, "✓ "+filepath.Join(e.home, "nerve.yaml")+" and 0 workflow(s) are valid\n", "")
}

// A file that is not there, given to --input NAME=@FILE or as the
// definition to run, gets a hint line.
func TestE2EMissingFileHints(t *testing.T) {
	e := newEnv(t)
	review := repoFile(t, "examples/code-review.yaml")
	wantOutput(t, "--input change=@my.diff", e.run("workflow", "run", review, "--input", "change=@my.diff"), 2, "",
		"nerve: --input change: my.diff: no such file or directory\n"+
			"hint: --input change=@FILE reads FILE, here "+filepath.Join(e.home, "my.diff")+"; to pass text that begins with @, give it in --input-file\n")

	r := e.shell("nerve workflow run examples/nope.yaml")
	lines := strings.Split(r.stderr, "\n")
	if r.code != 2 || r.stdout != "" || len(lines) != 3 || lines[0] != "nerve: workflow file examples/nope.yaml: no such file or directory" ||
		!strings.HasPrefix(lines[1], "hint: examples has code-change.yaml, code-review-agents.yaml, code-review.yaml, ") ||
		!strings.HasSuffix(lines[1], "; 'nerve workflow list' shows the workflows you can run by name") {
		t.Fatalf("workflow run examples/nope.yaml: %s", r)
	}
	wantOutput(t, "a directory that is not there", e.run("workflow", "run", "exmples/nope.yaml"), 2, "",
		"nerve: workflow file exmples/nope.yaml: no such file or directory\n"+
			"hint: there is no directory exmples in "+e.home+"; 'nerve workflow list' shows the workflows you can run by name\n")
}

// A mistyped command names the one meant, on one line, for subcommands
// too.
func TestE2EUnknownCommandSuggests(t *testing.T) {
	e := newEnv(t)
	wantOutput(t, "nerve workflwo", e.run("workflwo"), 2, "", "nerve: unknown command \"workflwo\"; did you mean \"workflow\"?\nhint: see 'nerve --help'\n")
	wantOutput(t, "nerve workflow rn", e.run("workflow", "rn"), 2, "",
		"nerve: unknown command \"rn\" for \"nerve workflow\"; did you mean \"run\"?\nhint: see 'nerve workflow --help'\n")
	wantOutput(t, "nerve help workflow cancle", e.run("help", "workflow", "cancle"), 2, "",
		"nerve: unknown command \"cancle\" for \"nerve workflow\"; did you mean \"cancel\"?\nhint: see 'nerve workflow --help'\n")
	wantOutput(t, "nerve frobnicate", e.run("frobnicate"), 2, "", "nerve: unknown command \"frobnicate\"\nhint: see 'nerve --help'\n")
}

// init's checklist shows the line of `codex --version` that names the
// version, not the warning codex prints before it, and its columns stay
// aligned past a long name.
func TestE2EInitChecklistVersionAndColumns(t *testing.T) {
	e := newEnv(t)
	e.write("bin/codex", "#!/bin/sh\necho 'WARNING: proceeding, even though we could not update PATH: Read-only file system (os error 30)'\necho 'codex-cli 0.46.0'\n")
	e.extra = []string{"PATH=" + filepath.Join(e.home, "bin") + ":/usr/bin:/bin"}
	e.write("nerve.yaml", "agent: {name: n1}\nadapters:\n  codex: {}\n  reviewer-bot-with-a-long-name: {type: exec, command: [sh]}\n")
	r := e.must(0, "init")
	width := len("adapter reviewer-bot-with-a-long-name")
	var codex string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "ready" {
			continue
		}
		// "✓ NAME<pad> DETAIL": the detail starts in one column for all.
		mark, rest, _ := strings.Cut(l, " ")
		if mark != "✓" || len(rest) < width+2 || rest[width] != ' ' || rest[width+1] == ' ' {
			t.Fatalf("line not aligned to %d: %q\n%s", width, l, r.stdout)
		}
		if strings.HasPrefix(rest, "adapter codex ") {
			codex = strings.TrimSpace(rest[width:])
		}
	}
	if !strings.HasPrefix(codex, "codex-cli 0.46.0 at "+filepath.Join(e.home, "bin", "codex")) {
		t.Fatalf("codex's check: %q\n%s", codex, r.stdout)
	}
}

// A remote URL where no Khala answers (/v1/health says so) is named as
// such, with a hint, wherever the remote is used.
func TestE2ENotAKhala(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	e := newEnv(t)
	msg := "remote weird: no Khala at " + srv.URL + " (GET /v1/health: 404 Not Found)"
	hint := "hint: check the remote's URL (nerve remote list): a Khala server answers GET " + srv.URL + "/v1/health"
	wantOutput(t, "init --enroll-token", e.run("init", "--remote", "weird="+srv.URL, "--enroll-token", "khala_enroll_x"), 1, "", "nerve: "+msg+"\n"+hint+"\n")
	e.must(0, "remote", "add", "weird", srv.URL)
	wantOutput(t, "workflow run weird/x", e.run("workflow", "run", "weird/x"), 2, "", "nerve: "+msg+"\n"+hint+"\n")
	r := e.must(0, "init")
	if want := fmt.Sprintf("! %-22s %s\n  %-22s %s\n", "remote weird", msg, "", hint); !strings.Contains(r.stdout, want) {
		t.Fatalf("init's checklist:\n%s", r.stdout)
	}
}

// Cancelling a thread that has ended exits 0 and says how it ended, as
// docker stop does, locally and on a Khala.
func TestE2ECancelEndedThread(t *testing.T) {
	e := newEnv(t)
	e.write("workflows/once.yaml", "workflow: once\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nroles:\n  w: {adapter: example, prompt: p}\n")
	e.must(0, "workflow", "run", "once")
	wantOutput(t, "cancel a completed thread", e.run("workflow", "cancel", "once#thread-1"), 0, "once#thread-1 already ended (completed)\n", "")
	if r := e.must(0, "workflow", "cancel", "once#thread-1", "--json"); !strings.Contains(r.stdout, `"status":"completed"`) {
		t.Fatalf("cancel --json: %s", r)
	}

	k := startKhala(t)
	e.write("nerve.yaml", "agent: {name: pusher}\nremotes:\n  origin: {url: \""+k.url+"\"}\n")
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	e.must(0, "workflow", "push", filepath.Join(e.home, "workflows/once.yaml"), "origin")
	e.must(0, "workflow", "run", "origin/once", "--detach")
	wantOutput(t, "cancel a queued remote thread", e.run("workflow", "cancel", "origin/once#thread-1"), 0, "origin/once#thread-1 cancelled\n", "")
	wantOutput(t, "cancel it again", e.run("workflow", "cancel", "origin/once#thread-1"), 0, "origin/once#thread-1 already ended (cancelled)\n", "")
}

const approveCloudWF = `workflow: approve
binding: cloud
moderator: '$count(messages) = 0 ? {"role": "approver", "instruction": "approve it"} : {"done": true, "result": last.meta}'
roles:
  approver:
    human: true
    prompt: Approve it.
    meta: {type: object, required: [approved], properties: {approved: {type: boolean}}}
`

// A person's machine: init --person-token checks the person's token and
// says nothing meant for agents; inbox asks the remote and starts no
// daemon; an answer whose meta does not match the schema names it, with
// the command that fits, on the remote and locally.
func TestE2EPersonMachineHints(t *testing.T) {
	k := startKhala(t)
	agent := newEnv(t)
	agent.write("nerve.yaml", "agent: {name: pusher}\nremotes:\n  origin: {url: \""+k.url+"\"}\n")
	agent.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	agent.must(0, "workflow", "push", agent.write("approve.yaml", approveCloudWF), "origin")
	agent.must(0, "workflow", "run", "origin/approve", "--detach")

	person := newEnv(t)
	tok := strings.TrimSpace(person.must(0, "khala", "user", "add", "alice", "--db", k.db).stdout)
	r := person.must(0, "init", "--remote", "origin="+k.url, "--person-token", tok)
	if r.stderr != "" || strings.Contains(r.stdout, "!") || strings.Contains(r.stdout, "agent token") ||
		!strings.Contains(r.stdout, "✓ remote origin          "+k.url+" (khala ") || !strings.Contains(r.stdout, ") accepts the person token stored for it, to answer human turns\n") {
		t.Fatalf("init --person-token: %s", r)
	}
	r = person.must(0, "inbox")
	if r.stderr != "" || !strings.Contains(r.stdout, "origin/approve#thread-1") {
		t.Fatalf("inbox: %s", r)
	}
	if _, err := os.Stat(filepath.Join(person.home, "nerve.sock")); err == nil || person.daemonPID() != 0 {
		t.Fatal("inbox with only remotes started a daemon")
	}
	hint := `hint: role approver's meta schema is {"properties":{"approved":{"type":"boolean"}},"required":["approved"],"type":"object"}; e.g. nerve thread answer `
	wantOutput(t, "a remote answer with the wrong meta", person.run("thread", "answer", "origin/approve#thread-1", "ok", "--meta", `{"approved": "yes"}`), 2, "",
		"nerve: remote origin: meta does not match the meta schema: at '/approved': got string, want boolean\n"+
			hint+`origin/approve#thread-1 "TEXT" --meta '{"approved": true}'`+"\n")

	local := newEnv(t)
	local.write("workflows/release.yaml", mustRead(t, repoFile(t, "examples/release.yaml")))
	local.must(0, "workflow", "run", "release", "--input", "version=1.2", "--detach")
	waitFor(t, "the approval to wait", func() bool { return strings.Contains(local.must(0, "inbox").stdout, "release#thread-1") })
	wantOutput(t, "a local answer with the wrong meta", local.run("thread", "answer", "release#thread-1", "Ship it", "--meta", `{"approved": "yes"}`), 2, "",
		"nerve: meta does not match the meta schema: at '/approved': got string, want boolean\n"+
			hint+`release#thread-1 "TEXT" --meta '{"approved": true}'`+"\n")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
