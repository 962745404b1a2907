package workflow

import (
	"errors"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// badNames are names no role or input may have: each broke a turn later
// (a NUL in an environment variable) or reads as an option.
var badNames = map[string]string{"NUL": "a\x00b", "newline": "a\nb", "empty": "", "too long": strings.Repeat("a", 65), "leading dash": "-a"}

// Role and input names follow one rule, refused at load with the field
// and the rule; the names the examples use pass.
func TestNamesFollowOneRule(t *testing.T) {
	for what, n := range badNames {
		for _, field := range []string{"roles", "inputs"} {
			src := "workflow: n\nmoderator: '{\"done\": true}'\nroles:\n  a: {adapter: x, prompt: A}\n"
			if field == "roles" {
				src += "  " + quoteJSON(n) + ": {adapter: x, prompt: A}\n"
			} else {
				src += "inputs:\n  " + quoteJSON(n) + ": {type: string}\n"
			}
			_, err := Parse("n.yaml", []byte(src), nil)
			var errs yamlfile.Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != field || !strings.Contains(errs[0].Msg, memberRule) {
				t.Errorf("%s %s: got %v, want one error at %s saying the rule", field, what, err, field)
			}
		}
	}
	if _, err := Parse("w.yaml", []byte("workflow: "+strings.Repeat("w", 65)+"\nmoderator: '{\"done\": true}'\nroles:\n  a: {adapter: x, prompt: A}\n"), nil); err == nil {
		t.Error("a workflow name of 65 characters was accepted")
	}
	for _, ok := range []string{"author", "max_rounds", "Reviewer2", "a.b-c", strings.Repeat("a", 64)} {
		src := "workflow: n\nmoderator: '{\"done\": true}'\nroles:\n  " + ok + ": {adapter: x, prompt: A}\ninputs:\n  " + ok + ": {type: string}\n"
		if _, err := Parse("n.yaml", []byte(src), nil); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func quoteJSON(s string) string {
	return `"` + strings.NewReplacer("\x00", `\0`, "\n", `\n`, `"`, `\"`).Replace(s) + `"`
}
