package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// nosuchfn calls a function nobody defines, at 1:10 of its moderator.
const nosuchfn = `workflow: nosuchfn
binding: BINDING
moderator: '{"done": $nosuchfn(input.x)}'
inputs: {x: {type: number}}
roles:
  r: {prompt: go}
`

// A moderator calling a function that does not exist: `nerve validate`
// says which and where, for an inline moderator and a file, and passes
// every example; a run fails naming it, locally and on Khala.
func TestE2EModeratorUnknownFunction(t *testing.T) {
	e := newEnv(t)
	inline := e.write("nosuchfn.yaml", strings.Replace(nosuchfn, "BINDING", "cloud", 1))
	e.write("fromfile.jsonata", "(\n  $n := $count(messages);\n  $n > 0 ? {\"done\": true} : $nope($n)\n)\n")
	file := e.write("fromfile.yaml", "workflow: fromfile\nbinding: cloud\nmoderator: fromfile.jsonata\nroles:\n  r: {prompt: go}\n")
	r := e.must(2, "validate", inline, file)
	want := []string{inline + ":3: moderator: unknown function $nosuchfn at 1:10",
		file + ":3: moderator: unknown function $nope at fromfile.jsonata:3:29"}
	for _, w := range want {
		if !strings.Contains(r.stdout, "✗ "+w+"\n") {
			t.Errorf("validate: want %q in:\n%s", w, r)
		}
	}
	examples, _ := filepath.Glob(repoFile(t, "examples") + "/*.yaml")
	if r := e.must(0, append([]string{"validate"}, examples...)...); strings.Contains(r.stdout, "✗") {
		t.Fatalf("validate of the examples:\n%s", r)
	}

	failed := "failed: workflow nosuchfn: moderator failed: T1006: attempted to invoke undefined function $nosuchfn at 1:10"
	e.write("workflows/nosuchfn.yaml", strings.Replace(strings.Replace(nosuchfn, "BINDING", "local", 1), "{prompt", "{adapter: example, prompt", 1))
	r = e.must(1, "workflow", "run", "nosuchfn", "-i", "x=1")
	if !strings.Contains(r.stderr+r.stdout, "nosuchfn#thread-1 "+failed) {
		t.Errorf("local run:\n%s", r)
	}

	k := startKhala(t)
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", "echo hi\n", "", 1)
	a.must(0, "workflow", "push", inline, "origin")
	r = a.must(1, "workflow", "run", "origin/nosuchfn", "-i", "x=1")
	if !strings.Contains(r.stderr+r.stdout, "origin/nosuchfn#thread-1 "+failed) {
		t.Errorf("remote run:\n%s", r)
	}
}
