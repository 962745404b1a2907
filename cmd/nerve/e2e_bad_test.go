package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// badEnv is one NERVE_HOME holding the bad and good things the cases name.
func badEnv(t *testing.T) *env {
	e := newEnv(t)
	td := repoFile(t, "adapter/testdata")
	// Fake agent CLIs that print the real CLIs' captured streams.
	e.write("bin/claude-api-error", fmt.Sprintf("#!/bin/sh\ncat %s/claude-api-error.jsonl\nexit 0\n", td))
	e.write("bin/claude-malformed", fmt.Sprintf("#!/bin/sh\ncat %s/malformed.jsonl\n", td))
	e.write("bin/claude-ok", fmt.Sprintf("#!/bin/sh\ncat %s/claude-success.jsonl\n", td))
	e.write("nerve.yaml", fmt.Sprintf(`adapters:
  claude-error: {type: claude, binary: %[1]s/bin/claude-api-error}
  claude-junk: {type: claude, binary: %[1]s/bin/claude-malformed}
  claude-ok: {type: claude, binary: %[1]s/bin/claude-ok}
  missing: {type: codex, binary: /nonexistent/codex}
  hang: {type: exec, command: [sleep, "300"], timeout: 1s}
  flood: {type: exec, command: [sh, -c, "head -c 300000000 /dev/zero | tr '\\0' x; echo"]}
daemon: {shutdown_grace: 1s}
sandbox: {read: [%[2]s]} # the captured streams the fake CLIs print
`, e.home, td))
	one := func(name, adapter, extra string) {
		e.write(name+".yaml", fmt.Sprintf(`workflow: %s
moderator: 'last = null ? {"role": "r"} : last.error ? {"fail": last.error.message} : {"done": true}'
roles:
  r: {adapter: %s, prompt: go%s}
`, name, adapter, extra))
	}
	one("api-error", "claude-error", "")
	one("junk", "claude-junk", "")
	one("ok", "claude-ok", "")
	one("missing", "missing", "")
	one("hang", "hang", "")
	one("flood", "flood", "")
	one("unknown-adapter", "nosuch", "")
	e.write("garbage.yaml", "workflow: garbage\nmoderator: '\"next please\"'\nroles:\n  r: {adapter: example, prompt: go}\n")
	e.write("nocompile.yaml", "workflow: nocompile\nmoderator: '{\"role\": '\nroles:\n  r: {adapter: example, prompt: go}\n")
	e.write("badschema.yaml", "workflow: badschema\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: example, prompt: go, meta: {type: objekt}}\n")
	e.write("unknownkey.yaml", "workflow: unknownkey\nmoderator: '{\"done\": true}'\nretries: 2\nroles:\n  r: {adapter: example, prompt: go}\n")
	e.write("malformed.yaml", "workflow: [\n")
	e.write("cloud.yaml", "workflow: cloudy\nbinding: cloud\nmoderator: '{\"done\": true}'\nroles:\n  r: {prompt: go}\n")
	e.write("badlimits.yaml", "workflow: badlimits\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: example, prompt: go}\nlimits: {max_steps: 0, idle: forever}\n")
	e.write("baddefault.yaml", "workflow: baddefault\nmoderator: '{\"done\": true}'\ninputs:\n  n: {type: integer, default: abc}\nroles:\n  r: {adapter: example, prompt: go}\n")
	// --input-file must hold an object; these hold something else.
	e.write("inputs/array.json", "[1, 2]\n")
	e.write("inputs/empty.json", "")
	e.write("inputs/number.json", "42\n")
	e.write("inputs/broken.json", "{\"change\":\n")
	e.write("inputs/dir.json/x", "")
	return e
}

func TestE2EBadInput(t *testing.T) {
	e := badEnv(t)
	h := e.home
	review := repoFile(t, "examples/code-review.yaml")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown subcommand", []string{"workflow", "ps"}, 2, `unknown command "ps" for "nerve workflow"`},
		{"flag of a subcommand", []string{"workspace", "prune", "--bogus"}, 2, "hint: see 'nerve workspace prune --help'"},
		{"argument to a command of none", []string{"version", "extra"}, 2, `nerve version takes no arguments, got "extra"`},
		{"too many arguments", []string{"thread", "messages", "a", "b"}, 2, "nerve thread messages takes at most one thread, got 2"},
		{"help on an unknown command", []string{"help", "bogus"}, 2, "nerve: unknown command \"bogus\"\nhint: see 'nerve --help'\n"},
		{"completion for an unknown shell", []string{"completion", "tcsh"}, 2, `unknown shell "tcsh"; want bash, fish, powershell, zsh`},
		{"whole number out of range", []string{"thread", "messages", "--last", "99999999999999999999"}, 2, `--last "99999999999999999999": want a whole number from`},
		{"not a duration", []string{"daemon", "stop", "--timeout", "soon"}, 2, `--timeout "soon": want a duration such as`},
		{"--last 0", []string{"thread", "messages", "ok#thread-1", "--last", "0"}, 2, "--last 0: want 1 or more"},
		{"--since in the future", []string{"thread", "messages", "ok#thread-1", "--since", "-5m"}, 2, `--since "-5m": a duration ago cannot be negative`},
		{"console port out of range", []string{"console", "--addr", "127.0.0.1:99999"}, 2, `--addr "127.0.0.1:99999": address 99999: invalid port`},
		{"khala port out of range", []string{"khala", "serve", "--addr", ":65536"}, 2, `--addr ":65536": address 65536: invalid port`},
		{"unknown subcommand two deep", []string{"khala", "user", "delete", "bob"}, 2, `unknown command "delete" for "nerve khala user"`},
		{"unknown flag", []string{"workflow", "run", review, "--colour"}, 2, "unknown flag: --colour"},
		{"run without ref", []string{"workflow", "run"}, 2, "takes 1 argument"},
		{"bad ref", []string{"workflow", "run", "Bad Name!"}, 2, `bad ref "Bad Name!"`},
		{"bad thread ref", []string{"workflow", "logs", "code-review#12"}, 2, "not of the form thread-N"},
		{"unknown workflow", []string{"workflow", "run", "no-such-workflow"}, 2, `unknown workflow "no-such-workflow"`},
		{"unknown remote", []string{"workflow", "run", "upstream/code-review"}, 2, `unknown remote "upstream"`},
		{"run a thread ref", []string{"workflow", "run", "code-review#thread-1"}, 2, "names a thread"},
		{"missing workflow file", []string{"workflow", "run", h + "/nope.yaml"}, 2, "no such file"},
		{"malformed workflow yaml", []string{"workflow", "run", h + "/malformed.yaml"}, 2, "malformed.yaml:1: invalid YAML"},
		{"unknown key in workflow", []string{"workflow", "run", h + "/unknownkey.yaml"}, 2, `unknownkey.yaml:3: retries: unknown key "retries"`},
		{"moderator does not compile", []string{"workflow", "run", h + "/nocompile.yaml"}, 2, "moderator: does not compile"},
		{"invalid meta schema", []string{"workflow", "run", h + "/badschema.yaml"}, 2, "roles.r.meta: not a valid JSON Schema"},
		{"unknown adapter", []string{"workflow", "run", h + "/unknown-adapter.yaml"}, 2, `unknown adapter "nosuch"`},
		{"cloud workflow run locally", []string{"workflow", "run", h + "/cloud.yaml"}, 2, "has binding cloud"},
		{"missing required input", []string{"workflow", "run", review}, 2, `input "change" is required`},
		{"wrong input type", []string{"workflow", "run", review, "-i", "change=x", "-i", "max_rounds=lots"}, 2, `input "max_rounds" must be of type integer`},
		{"undeclared input", []string{"workflow", "run", review, "-i", "change=x", "-i", "colour=red"}, 2, `input "colour" is not declared`},
		{"input without =", []string{"workflow", "run", review, "-i", "change"}, 2, `bad --input "change"`},
		{"missing input file", []string{"workflow", "run", review, "--input-file", h + "/none.json"}, 2, "input file " + h + "/none.json: no such file or directory"},
		{"input file is a directory", []string{"workflow", "run", review, "--input-file", h + "/inputs/dir.json"}, 2, "input file " + h + "/inputs/dir.json: is a directory"},
		{"input file not JSON or YAML", []string{"workflow", "run", review, "--input-file", h + "/inputs/broken.json"}, 2, "broken.json is not valid JSON or YAML: line 1: did not find expected node content"},
		{"input file an array", []string{"workflow", "run", review, "--input-file", h + "/inputs/array.json"}, 2, "array.json holds an array; it must hold an object of input names to values\nhint: "},
		{"input file a number", []string{"workflow", "run", review, "--input-file", h + "/inputs/number.json"}, 2, "number.json holds a number; it must hold an object"},
		{"input file empty", []string{"workflow", "run", review, "--input-file", h + "/inputs/empty.json"}, 2, "empty.json is empty; it must hold an object"},
		{"bad limits", []string{"workflow", "run", h + "/badlimits.yaml"}, 2, `badlimits.yaml:5: limits.idle: "forever" is not a duration (want e.g. 90s, 20m, 1h) (and 1 more problems)`},
		{"default of the wrong type", []string{"workflow", "run", h + "/baddefault.yaml"}, 2, `inputs.n.default: must be of type integer, got "abc"`},
		{"priority on a local file", []string{"workflow", "run", review, "-i", "change=x", "--priority", "5"}, 2,
			"hint: push it to a remote and run it there by name: nerve workflow push " + review + " REMOTE && nerve workflow run REMOTE/code-review --priority 5"},
		{"priority on a local name", []string{"workflow", "run", "ok", "--priority", "5"}, 2, "hint: run it on a remote: nerve workflow run REMOTE/ok --priority 5"},
		{"workdir does not exist", []string{"workflow", "run", review, "-i", "change=x", "--workdir", h + "/gone"}, 2, "workdir " + h + "/gone does not exist"},
		{"moderator returns garbage", []string{"workflow", "run", h + "/garbage.yaml"}, 1, `moderator returned "next please"`},
		{"missing agent binary", []string{"workflow", "run", h + "/missing.yaml"}, 1, "/nonexistent/codex"},
		{"exit 0 with an error event", []string{"workflow", "run", h + "/api-error.yaml"}, 1, "API Error: 500"},
		{"malformed JSON output", []string{"workflow", "run", h + "/junk.yaml"}, 1, "no result event"},
		{"adapter that hangs", []string{"workflow", "run", h + "/hang.yaml"}, 1, "timed out after 1s"},
		{"unknown thread", []string{"workflow", "logs", "ok#thread-99"}, 2, `unknown thread "thread-99"`},
		{"threads of an unknown workflow", []string{"workflow", "logs", "no-such-workflow"}, 2, "hint: see the workflows with 'nerve workflow list'"},
		{"follow an unknown workflow", []string{"workflow", "logs", "no-such-workflow", "-f"}, 2, `unknown workflow "no-such-workflow"`},
		{"answer a negative step", []string{"thread", "answer", "ok#thread-1", "yes", "--step", "-1"}, 2, "--step takes a positive number (steps count from 1), not -1"},
		{"answer step 0", []string{"thread", "answer", "ok#thread-1", "yes", "--step", "0"}, 2, "--step takes a positive number (steps count from 1), not 0"},
		{"thread of another workflow", []string{"thread", "messages", "junk#thread-1"}, 2, "is a thread of"},
		{"thread messages without ref", []string{"thread", "messages"}, 2, "NERVE_THREAD is not set"},
		{"bad --since", []string{"thread", "messages", "ok#thread-1", "--since", "yesterday"}, 2, `--since "yesterday"`},
		{"cancel without thread", []string{"workflow", "cancel", "ok"}, 2, "names no thread"},
		{"bad --log-level", []string{"daemon", "--log-level", "loud"}, 2, `nerve: --log-level "loud": unknown level "loud"`},
		{"empty --name", []string{"daemon", "--name", ""}, 2, `nerve: --name "": must not be empty`},
	}
	// A good thread first, so thread-1 exists for the thread cases.
	e.must(0, "workflow", "run", h+"/ok.yaml")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			se := *e
			se.t = t
			r := se.must(tc.code, tc.args...)
			if !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("stderr lacks %q:\n%s", tc.want, r)
			}
			if strings.Contains(r.stderr, "strconv.") {
				t.Fatalf("Go internals in an error:\n%s", r.stderr)
			}
			if errLines := strings.Split(strings.TrimSpace(r.stderr), "\n"); tc.code == 2 && len(errLines) > 2 {
				t.Fatalf("a usage error is one line (and a hint):\n%s", r.stderr)
			}
		})
	}
}

func TestE2EFloodStaysBounded(t *testing.T) {
	e := badEnv(t)
	r := e.must(0, "workflow", "run", e.home+"/flood.yaml", "--json")
	if !strings.Contains(r.stdout, `"status":"completed"`) {
		t.Fatalf("flood: %s", r)
	}
	status, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(e.daemonPID()), "status"))
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			if kb > 200<<10 {
				t.Fatalf("daemon peak RSS %d KiB after a 300 MB flood; output must be bounded", kb)
			}
			t.Logf("daemon peak RSS after a 300 MB flood: %d KiB", kb)
		}
	}
	msgs := e.must(0, "thread", "messages", "flood#thread-1", "--json")
	if len(msgs.stdout) > 2<<20 {
		t.Fatalf("stored message is %d bytes", len(msgs.stdout))
	}
}

func TestE2EValidateReportsEverything(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "agent:\n  max_concurrent_turns: 0\nadapters:\n  claude:\n    timout: 1m\n")
	e.write("workflows/a.yaml", "workflow: a\nmoderator: '{'\nroles:\n  r: {adapter: nosuch, prompt: p}\n")
	e.write("workflows/b.yaml", "workflow: b\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: ghost, prompt: p}\n")
	// A name taken twice is the second file's problem.
	e.write("workflows/dup-one.yaml", "workflow: dup\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: example, prompt: p}\n")
	two := e.write("workflows/dup-two.yaml", "# again\nworkflow: dup\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: example, prompt: p}\n")
	// Every bad limit, each under its own name, though they share a line.
	e.write("workflows/limits.yaml", "workflow: limits\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: example, prompt: p}\n"+
		"limits: {max_steps: 0, claim: 5m, idle: forever, max_attempts: -2, max_cost_usd: -1, max_tokens: x}\n")
	r := e.must(2, "validate")
	for _, want := range []string{"nerve.yaml:5: adapters.claude.timout: unknown key", "a.yaml", "moderator: does not compile", `unknown adapter "ghost"`,
		"✗ " + two + `:2: workflow: "dup" is already the name of ` + filepath.Join(e.home, "workflows", "dup-one.yaml"),
		"limits.yaml:5: limits.max_steps: must be at least 1, got 0", `limits.yaml:5: limits.idle: "forever" is not a duration`,
		"limits.yaml:5: limits.max_attempts: must be at least 1, got -2", "limits.yaml:5: limits.max_cost_usd: must be a non-negative",
		`limits.yaml:5: limits.max_tokens: "x" is not a whole number`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("validate lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.stdout, "limits.claim") {
		t.Fatalf("validate blames the good limit:\n%s", r)
	}
	if strings.Contains(r.stdout, "✗ :") {
		t.Fatalf("a problem names no file:\n%s", r)
	}
	js := e.must(2, "validate", "--json")
	if !strings.Contains(js.stdout, `"ok":false`) || !strings.Contains(js.stdout, `"line":5`) {
		t.Fatalf("validate --json: %s", js)
	}
	if !strings.Contains(js.stdout, `{"file":"`+two+`","message":"\"dup\" is already the name of`) || strings.Contains(js.stdout, `"file":""`) {
		t.Fatalf("validate --json: the duplicate name is not dup-two.yaml's problem: %s", js)
	}
	// Files named are checked too, against the same nerve.yaml.
	c := e.write("elsewhere/c.yaml", "workflow: c\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: phantom, prompt: p}\n")
	r = e.must(2, "validate", c, filepath.Join(e.home, "nope.yaml"))
	for _, want := range []string{c + `: roles.r.adapter: unknown adapter "phantom"`, "nope.yaml: no such file or directory", `unknown adapter "ghost"`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("validate of files lacks %q:\n%s", want, r)
		}
	}
	e.write("nerve.yaml", "")
	os.RemoveAll(filepath.Join(e.home, "workflows"))
	e.must(0, "validate", repoFile(t, "examples/code-review.yaml"))
}
