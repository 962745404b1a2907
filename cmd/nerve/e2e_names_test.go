package main

import (
	"strings"
	"testing"
)

// nerve validate refuses role and input names that break the names rule,
// each at its field, exiting 2.
func TestE2EValidateRefusesBadNames(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "")
	f := e.write("names.yaml", "workflow: names\nmoderator: '{\"done\": true}'\ninputs:\n  \"-x\": {type: string}\n  \""+strings.Repeat("i", 65)+"\": {type: string}\n"+
		"roles:\n  r: {adapter: example, prompt: p}\n  \"a\\0b\": {adapter: example, prompt: p}\n  \"a\\nb\": {adapter: example, prompt: p}\n  \"\": {adapter: example, prompt: p}\n")
	r := e.must(2, "validate", f)
	for _, want := range []string{`inputs: name "-x"`, `inputs: name "iiii`, `roles: name "a\x00b"`, `roles: name "a\nb"`, `roles: name ""`, "at most 64 in all"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("validate lacks %q:\n%s", want, r)
		}
	}
}
