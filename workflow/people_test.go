package workflow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHumanRoleValidation(t *testing.T) {
	cases := map[string]string{
		// a human role names no adapter
		"binding: local\nroles:\n  r: {human: true, adapter: x, prompt: P}\n": "roles.r.adapter",
		// answered_by names Khala people: cloud only
		"binding: local\nroles:\n  r: {human: true, answered_by: [alice], prompt: P}\n": "roles.r.answered_by",
		// answered_by without human
		"binding: cloud\nroles:\n  r: {answered_by: [alice], prompt: P}\n": "only a human role",
		// a bad person name
		"binding: cloud\nroles:\n  r: {human: true, answered_by: [Alice!], prompt: P}\n": "person name",
	}
	for body, want := range cases {
		_, err := Parse("h.yaml", []byte("workflow: h\nmoderator: '{\"done\": true}'\n"+body), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %q", body, err, want)
		}
	}
	for _, body := range []string{
		"binding: local\nroles:\n  r: {human: true, prompt: P}\n",
		"binding: cloud\nroles:\n  r: {human: true, answered_by: [alice, bob.b], prompt: P}\n",
	} {
		d, err := Parse("h.yaml", []byte("workflow: h\nmoderator: '{\"done\": true}'\n"+body), nil)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if !d.IsHuman("r") || d.IsHuman("nope") {
			t.Fatalf("IsHuman wrong for %s", body)
		}
	}
}

func TestRouteChildTurns(t *testing.T) {
	d := defWith(t, `[{"workflow": "code-review", "input": {"change": "x"}}, {"workflow": "lint", "role": "linter"}, {"role": "a"}]`, 0)
	dec, err := Route(context.Background(), d, state(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Turns) != 3 {
		t.Fatalf("turns = %+v", dec.Turns)
	}
	c0, c1, a := dec.Turns[0], dec.Turns[1], dec.Turns[2]
	if !c0.IsChild() || c0.Workflow != "code-review" || c0.Role != "code-review" || c0.Input["change"] != "x" || c0.Step != 3 {
		t.Fatalf("first child = %+v", c0)
	}
	if !c1.IsChild() || c1.Role != "linter" || c1.Input != nil || c1.Step != 4 {
		t.Fatalf("labelled child = %+v", c1)
	}
	if a.IsChild() || a.Role != "a" || a.Step != 5 {
		t.Fatalf("role turn = %+v", a)
	}
	for mod, want := range map[string]string{
		`{"workflow": 5}`:                     "want a workflow name",
		`{"workflow": "Bad Name"}`:            "want a workflow name",
		`{"workflow": "w", "input": [1]}`:     "not an object",
		`{"workflow": "w", "role": ""}`:       "role label",
		`[{"role": "a"}, {"workflow": "w!"}]`: "item 1",
	} {
		_, err := Route(context.Background(), defWith(t, mod, 0), state(0))
		var re *RoutingError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a RoutingError containing %q", mod, err, want)
		}
	}
}

func TestCheckAnswer(t *testing.T) {
	d, err := Parse("h.yaml", []byte(`workflow: h
moderator: '{"done": true}'
roles:
  free: {human: true, prompt: P}
  approver:
    human: true
    prompt: P
    meta: {type: object, required: [approved], properties: {approved: {type: boolean}}}
  bot: {adapter: x, prompt: P}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := []struct {
		role, content string
		meta          any
	}{
		{"free", "looks good", nil},
		{"approver", "", map[string]any{"approved": true}},
		{"approver", "yes", map[string]any{"approved": false, "extra": 1}},
	}
	for _, c := range ok {
		if err := d.CheckAnswer(c.role, c.content, c.meta); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := []struct {
		role, content string
		meta          any
		want          string
	}{
		{"approver", "yes", nil, "--meta"},
		{"approver", "", map[string]any{"approved": "yes"}, "does not match"},
		{"free", "  ", nil, "empty"},
		{"bot", "x", nil, "played by an agent"},
		{"ghost", "x", nil, "no role"},
	}
	for _, c := range bad {
		err := d.CheckAnswer(c.role, c.content, c.meta)
		var ae *AnswerError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) || ae.ExitCode() != 2 {
			t.Errorf("%+v: got %v, want an AnswerError containing %q", c, err, c.want)
		}
	}
}

func TestCheckDepth(t *testing.T) {
	if err := CheckDepth(2, 0); err != nil {
		t.Fatalf("depth 3 of default 3: %v", err)
	}
	err := CheckDepth(3, 0)
	var de *DepthError
	if !errors.As(err, &de) || de.Depth != 4 || !strings.Contains(err.Error(), "max_spawn_depth 3") {
		t.Fatalf("depth 4: %v", err)
	}
	if err := CheckDepth(0, 1); err != nil {
		t.Fatalf("depth 1 of 1: %v", err)
	}
}

func TestStartEvents(t *testing.T) {
	d, err := Parse("h.yaml", []byte("workflow: h\nbinding: cloud\nmoderator: '{\"done\": true}'\nroles:\n  ok: {human: true, answered_by: [alice, bob], prompt: P}\n  w: {adapter: codex, prompt: P}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	th := &Thread{ID: "thread-1"}
	now := time.Now()
	if ev := startEvent(d, th, Turn{Step: 1, Role: "ok"}, "a1", now); ev.Type != EventTurnWaiting || ev.Message != "waiting for alice or bob" {
		t.Fatalf("human: %+v", ev)
	}
	if ev := startEvent(d, th, Turn{Step: 2, Role: "w"}, "a1", now); ev.Type != EventTurnStarted || ev.Adapter != "codex" {
		t.Fatalf("agent: %+v", ev)
	}
	if ev := startEvent(d, th, Turn{Step: 3, Role: "rev", Workflow: "code-review"}, "a1", now); ev.Type != EventTurnStarted || ev.Message != "child workflow code-review" {
		t.Fatalf("child: %+v", ev)
	}
}
