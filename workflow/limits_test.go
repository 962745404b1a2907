package workflow_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/yamlfile"
	"github.com/nerve-agents/nerve/workflow"
)

// problems parses src and returns each problem as "line field: message".
func problems(t *testing.T, src string) []string {
	t.Helper()
	_, err := workflow.Parse("w.yaml", []byte(src), nil)
	var errs yamlfile.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want located problems, got %v", err)
	}
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Msg)
	}
	return out
}

const oneRole = "workflow: w\nmoderator: '{\"done\": true}'\nroles:\n  a: {adapter: x, prompt: A}\n"

// A flow mapping puts every limit on one line: each problem still names
// its own field, and every one is reported, those the YAML types catch
// and those the ranges catch alike.
func TestEveryLimitProblemNamesItsField(t *testing.T) {
	cases := map[string][]string{
		"limits: {claim: 5m, idle: forever}\n": {`limits.idle: "forever" is not a duration (want e.g. 90s, 20m, 1h)`},
		"limits: {max_steps: x, claim: forever, max_attempts: -2, idle: 0s, max_cost_usd: -1, max_tokens: 1.5}\n": {
			`limits.max_steps: want a whole number, got "x"`,
			`limits.claim: "forever" is not a duration (want e.g. 90s, 20m, 1h)`,
			"limits.max_attempts: must be at least 1, got -2 (the times a turn is leased before its thread fails; 1: never re-queued)",
			"limits.max_cost_usd: must be a non-negative amount in USD, got -1",
			`limits.max_tokens: "1.5" is not a whole number`,
		},
		"limits:\n  max_steps: 0\n  claim: 0s\n  max_attempts: 0\n  idle: never\n  max_tokens: -5\n": {
			"limits.max_steps: must be at least 1, got 0 (leave it out for the default, 50)",
			"limits.claim: must be longer than 0s (the lease on a claimed turn; leave it out for the default, 10m0s)",
			"limits.max_attempts: must be at least 1, got 0 (the times a turn is leased before its thread fails; 1: never re-queued)",
			`limits.idle: "never" is not a duration (want e.g. 90s, 20m, 1h)`,
			"limits.max_tokens: must not be negative, got -5",
		},
	}
	for limits, want := range cases {
		got := problems(t, oneRole+limits)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s got\n  %s\nwant\n  %s", limits, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// Where 0 means something it is accepted: no idle notice, no budget.
func TestLimitsThatMayBeZero(t *testing.T) {
	d, err := workflow.Parse("w.yaml", []byte(oneRole+"limits: {idle: 0s, max_cost_usd: 0, max_tokens: 0}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := d.Limits; l.MaxSteps != workflow.DefaultMaxSteps || l.MaxAttempts != 3 || l.Claim.D().Minutes() != 10 || l.Idle != 0 {
		t.Fatalf("limits %+v: want the defaults and no idle notice", l)
	}
}

// A default is what a thread gets when it leaves the input out, so it must
// be of the input's type; a default written as text is converted as
// --input's value would be.
func TestInputDefaultsHaveTheirType(t *testing.T) {
	got := problems(t, oneRole+"inputs:\n  n: {type: integer, default: abc}\n  b: {type: boolean, default: 1}\n  l: {type: array, default: x}\n  s: {type: string, default: ok}\n")
	want := []string{`inputs.b.default: must be of type boolean, got 1`, `inputs.l.default: must be of type array, got "x"`, `inputs.n.default: must be of type integer, got "abc"`}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	d, err := workflow.Parse("w.yaml", []byte(oneRole+"inputs:\n  n: {type: integer, default: \"3\"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if in, err := d.CheckInputs(nil); err != nil || in["n"] != int64(3) {
		t.Fatalf("default %v (%T), %v: want the integer 3", in["n"], in["n"], err)
	}
}

// A value that did not decode is reported once, not again by the checks
// of what it should have been.
func TestUndecodedValueReportedOnce(t *testing.T) {
	got := problems(t, "workflow: [w]\nmoderator: '{\"done\": true}'\nroles: 5\nlimits: 3\n")
	if len(got) != 3 || !strings.HasPrefix(got[0], "workflow: ") || !strings.HasPrefix(got[1], "roles: ") || !strings.HasPrefix(got[2], "limits: ") {
		t.Fatalf("got %q, want one problem each for workflow, roles and limits", got)
	}
}

// A stored definition (a thread's copy, one a Khala published) was
// accepted before 0 was refused as a limit and before input defaults were
// checked: it still parses, its 0s take the defaults as they did, and its
// default stays as written. What was never accepted is still refused.
func TestStoredDefinitionKeepsTheOldMeaning(t *testing.T) {
	old := oneRole + "inputs:\n  n: {type: integer, default: abc}\n  m: {type: integer, default: \"3\"}\nlimits: {max_steps: 0, claim: 0s, max_attempts: 0}\n"
	if got := problems(t, old); len(got) != 4 {
		t.Fatalf("a definition written today: got %q, want the three limits and the default refused", got)
	}
	d, err := workflow.ParseStored("w (stored)", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if l := d.Limits; l.MaxSteps != workflow.DefaultMaxSteps || l.MaxAttempts != 3 || l.Claim.D().Minutes() != 10 {
		t.Fatalf("limits %+v: want the defaults", l)
	}
	if in, err := d.CheckInputs(nil); err != nil || in["n"] != "abc" || in["m"] != int64(3) {
		t.Fatalf("defaults %v, %v: want abc as written and m converted", in, err)
	}
	if _, err := workflow.ParseStored("w (stored)", []byte(oneRole+"limits: {max_steps: -1}\n")); err == nil {
		t.Fatal("max_steps: -1 was never accepted")
	}
}
