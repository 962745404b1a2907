package khala

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/workflow"
)

// pairFields is pairWF as a client of a JSON API writes it: the YAML's
// fields as a JSON object, without the name (the path has it) or the
// binding (Khala hosts cloud workflows).
func pairFields() map[string]any {
	return map[string]any{
		"description": "author and reviewer take turns",
		"moderator": `$count(messages) >= input.turns
  ? {"done": true, "result": {"turns": $count(messages), "last": last.content}}
  : {"role": $count(messages) % 2 = 0 ? "author" : "reviewer", "instruction": "turn " & ($count(messages) + 1)}`,
		"inputs": map[string]any{"turns": map[string]any{"type": "integer", "default": 2}},
		"roles": map[string]any{
			"author":   map[string]any{"prompt": "You write the change."},
			"reviewer": map[string]any{"prompt": "You review the change."},
		},
		"limits": map[string]any{"max_steps": 3000000, "claim": "10m", "max_attempts": 2},
	}
}

func TestPutWorkflowAsJSONFields(t *testing.T) { eachBackend(t, testPutWorkflowAsJSONFields) }

func testPutWorkflowAsJSONFields(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	var put workflowJSON
	a.must("PUT", "/v1/workflows/pair", pairFields(), 201, &put)
	if put.Name != "pair" || put.Binding != workflow.BindingCloud || strings.Join(put.Roles, ",") != "author,reviewer" ||
		put.Limits.MaxSteps != 3000000 || put.Limits.Claim != "10m0s" {
		t.Fatalf("PUT answered %+v", put)
	}
	// The same fields again change nothing.
	var again workflowJSON
	a.must("PUT", "/v1/workflows/pair", pairFields(), 200, &again)
	if again.Version != put.Version {
		t.Fatalf("the same fields made version %s, then %s", put.Version, again.Version)
	}
	// What is stored is YAML that parses as the definition.
	var got workflowJSON
	a.must("GET", "/v1/workflows/pair", nil, 200, &got)
	def, err := workflow.ParseSource("pair.yaml", []byte(got.Source))
	if err != nil {
		t.Fatalf("stored source does not parse: %v\n%s", err, got.Source)
	}
	if def.Inputs["turns"].Type != "integer" || def.Limits.MaxSteps != 3000000 || strings.HasPrefix(got.Source, "{") {
		t.Fatalf("stored definition: %+v\n%s", def, got.Source)
	}
	// And it runs.
	id := a.start("pair", map[string]any{"turns": 1}, "")
	tk := a.claimOne()
	if tk.Role != "author" || tk.Instruction != "turn 1" {
		t.Fatalf("turn: %+v", tk)
	}
	if s, d := a.respond(tk, "done", nil); s != 200 {
		t.Fatalf("respond: %d %s", s, d)
	}
	if th := a.thread(id); th.Status != workflow.StatusCompleted {
		t.Fatalf("thread: %+v", th.Thread)
	}
}

func TestPutWorkflowFieldErrors(t *testing.T) { eachBackend(t, testPutWorkflowFieldErrors) }

func testPutWorkflowFieldErrors(t *testing.T, bk backend) {
	ts := bk.server(t)
	a := ts.agent("a")
	edit := func(f func(m map[string]any)) map[string]any {
		m := pairFields()
		f(m)
		return m
	}
	role := func(m map[string]any, name string) map[string]any {
		return m["roles"].(map[string]any)[name].(map[string]any)
	}
	cases := []struct {
		name string
		body any
		want []string // in the message, each naming its field
	}{
		{"missing prompt and bad input type", edit(func(m map[string]any) {
			delete(role(m, "author"), "prompt")
			m["inputs"].(map[string]any)["turns"].(map[string]any)["type"] = "int"
		}), []string{"roles.author.prompt: is required", `inputs.turns.type: unknown type "int"`}},
		{"unknown field", edit(func(m map[string]any) { role(m, "reviewer")["promt"] = "x" }), []string{`roles.reviewer.promt: unknown key "promt"`}},
		{"wrong type", edit(func(m map[string]any) { m["limits"].(map[string]any)["max_steps"] = "lots" }), []string{"limits.max_steps"}},
		{"bad moderator", edit(func(m map[string]any) { m["moderator"] = "$count(" }), []string{"moderator: "}},
		{"other name", edit(func(m map[string]any) { m["workflow"] = "other" }), []string{`the definition is workflow "other"`}},
		{"both forms", edit(func(m map[string]any) { m["source"] = pairWF }), []string{"not both"}},
		{"empty", map[string]any{}, []string{"no definition"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, data := a.do("PUT", "/v1/workflows/pair", tc.body)
			var eb errorBody
			if err := json.Unmarshal(data, &eb); err != nil || status != 400 {
				t.Fatalf("want 400, got %d %s", status, data)
			}
			for _, w := range tc.want {
				if !strings.Contains(eb.Error.Message, w) {
					t.Errorf("message %q lacks %q", eb.Error.Message, w)
				}
			}
			if strings.Contains(eb.Error.Message, "pair.yaml:") {
				t.Errorf("message %q points at lines of a YAML the client never sent", eb.Error.Message)
			}
		})
	}
	if status, _ := a.do("GET", "/v1/workflows/pair", nil); status != 404 {
		t.Fatalf("a rejected definition was stored: GET is %d", status)
	}
}
