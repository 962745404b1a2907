package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/usage"
)

func defWith(t *testing.T, moderator string, maxSteps int) *Definition {
	t.Helper()
	src := "workflow: m\nmoderator: " + quoteYAML(moderator) + "\nroles:\n  a: {adapter: x, prompt: A}\n  b: {adapter: x, prompt: B}\n"
	if maxSteps > 0 {
		src += "limits: {max_steps: " + strconv.Itoa(maxSteps) + "}\n"
	}
	d, err := Parse("m.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func quoteYAML(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func itoa(n int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+n/10%10)) + string(rune('0'+n%10)))
}

func state(step int, msgs ...Message) State {
	return NewState(&Thread{ID: "thread-1", Workflow: "m", Step: step, Input: map[string]any{"x": 1.0}}, msgs)
}

func TestRouteShapes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		mod   string
		check func(Decision) bool
	}{
		{`{"role": "a", "instruction": "go " & input.x}`, func(d Decision) bool {
			return len(d.Turns) == 1 && reflect.DeepEqual(d.Turns[0], Turn{Step: 1, Role: "a", Instruction: "go 1"})
		}},
		{`[{"role": "a", "instruction": "1"}, {"role": "b", "instruction": "2"}]`, func(d Decision) bool {
			return len(d.Turns) == 2 && d.Turns[1].Step == 2 && d.Turns[1].Role == "b"
		}},
		{`{"done": true, "result": {"n": 1}}`, func(d Decision) bool { return d.Done && d.HasResult }},
		{`{"done": true}`, func(d Decision) bool { return d.Done && !d.HasResult }},
		{`{"fail": "nope"}`, func(d Decision) bool { return d.Fail == "nope" }},
		{`{"role": "a"}`, func(d Decision) bool { return len(d.Turns) == 1 && d.Turns[0].Instruction == "" }},
	}
	for _, tc := range cases {
		d, err := Route(ctx, defWith(t, tc.mod, 0), state(0))
		if err != nil || !tc.check(d) {
			t.Fatalf("%s: got %+v, %v", tc.mod, d, err)
		}
	}
}

// Every malformed output fails the thread with a reason naming the workflow.
func TestRouteGarbage(t *testing.T) {
	cases := map[string]string{
		`"next please"`:                     `returned "next please"`,
		`42`:                                "returned 42",
		`[]`:                                "empty array",
		`{"role": "c", "instruction": "x"}`: `named role "c", which m does not define`,
		`{"instruction": "x"}`:              "no role",
		`{"role": "a", "instruction": 5}`:   "not a string",
		`[{"role": "a"}, "b"]`:              "item 1",
		`{"done": false}`:                   "done must be true",
		`{"fail": ""}`:                      "non-empty reason",
		`nothing.here`:                      "returned nothing",
		`$error("boom")`:                    "failed: ",
		`$number("x") + 1`:                  "failed: ",
	}
	for mod, want := range cases {
		_, err := Route(context.Background(), defWith(t, mod, 0), state(0))
		var re *RoutingError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "workflow m") {
			t.Fatalf("%s: got %v, want a RoutingError containing %q", mod, err, want)
		}
	}
}

func TestRouteMaxSteps(t *testing.T) {
	d := defWith(t, `[{"role": "a"}, {"role": "b"}]`, 3)
	if _, err := Route(context.Background(), d, state(1)); err != nil {
		t.Fatalf("steps 2-3 fit in 3: %v", err)
	}
	_, err := Route(context.Background(), d, state(2))
	if err == nil || !strings.Contains(err.Error(), "exceeded max_steps (3)") {
		t.Fatalf("want max_steps failure, got %v", err)
	}
}

func TestModeratorSeesDocumentedShape(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m := Message{Step: 1, Role: "a", Agent: "laptop-1", Content: "hi", Meta: map[string]any{"ok": true}, At: at}
	d := defWith(t, `{"fail": workflow & "|" & thread & "|" & step & "|" & $count(messages) & "|" & last.role & "|" & last.at & "|" & $string(last.meta.ok) & "|" & $string(last.error)}`, 0)
	dec, err := Route(context.Background(), d, state(1, m))
	if err != nil {
		t.Fatal(err)
	}
	if want := "m|thread-1|1|1|a|2026-11-22T10:00:00Z|true|null"; dec.Fail != want {
		t.Fatalf("moderator saw %q, want %q", dec.Fail, want)
	}
}

func TestModeratorTimeout(t *testing.T) {
	d := defWith(t, `($f := function($n){ $n > 0 ? $f($n - 1) + $f($n - 1) : 1 }; $f(60))`, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Route(ctx, d, state(0))
	if err == nil {
		t.Fatal("a runaway moderator must be stopped")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the moderator deadline was not honoured")
	}
}

// The document's usage is the thread's totals so far, cost null while no
// answer had one.
func TestDocumentUsage(t *testing.T) {
	d := defWith(t, `{"done": true, "result": usage}`, 0)
	th := &Thread{ID: "thread-1", Workflow: "m"}
	for _, want := range []string{
		`{"cache_read_tokens":0,"cost_usd":null,"duration_ms":0,"input_tokens":0,"messages":0,"output_tokens":0,"unpriced":0}`,
		`{"cache_read_tokens":0,"cost_usd":0.5,"duration_ms":9,"input_tokens":5,"messages":1,"output_tokens":2,"unpriced":0}`,
	} {
		dec, err := Route(context.Background(), d, NewState(th, nil))
		got, _ := json.Marshal(dec.Result)
		if err != nil || string(got) != want {
			t.Fatalf("got %s, %v; want %s", got, err, want)
		}
		th.Usage.Add(&usage.Usage{InputTokens: usage.Int(5), OutputTokens: usage.Int(2), CostUSD: usage.Float(0.5), DurationMS: 9})
	}
}
