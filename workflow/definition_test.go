package workflow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

const twoRoles = `workflow: pair
binding: local
moderator: |
  last = null ? {"role": "a", "instruction": "go"} : {"done": true}
inputs:
  topic: {type: string, required: true}
  rounds: {type: integer, default: 2}
roles:
  a: {adapter: example, prompt: "You are A."}
  b:
    adapter: example
    prompt: You are B.
    meta:
      type: object
      required: [ok]
      properties: {ok: {type: boolean}}
`

func mustParse(t *testing.T, src string) *Definition {
	t.Helper()
	d, err := Parse("pair.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseDefinition(t *testing.T) {
	d := mustParse(t, twoRoles)
	if d.Name != "pair" || d.Limits.MaxSteps != DefaultMaxSteps || d.Roles["b"].Schema() == nil {
		t.Fatalf("parsed wrong: %+v", d)
	}
	// The stored source stands alone: it parses with no directory.
	if _, err := ParseSource("stored", d.Source); err != nil {
		t.Fatalf("source does not reparse: %v", err)
	}
}

func TestModeratorFileBesideDefinition(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.jsonata"), []byte(`{"done": true}`), 0o600)
	src := strings.Replace(twoRoles, "moderator: |\n  last = null ? {\"role\": \"a\", \"instruction\": \"go\"} : {\"done\": true}\n", "moderator: m.jsonata\n", 1)
	os.WriteFile(filepath.Join(dir, "pair.yaml"), []byte(src), 0o600)
	d, err := LoadFile(filepath.Join(dir, "pair.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Moderator.Source() != `{"done": true}` || !strings.Contains(string(d.Source), `{"done": true}`) {
		t.Fatalf("moderator not read from file / not inlined: %q", d.Source)
	}
}

func TestBadDefinitions(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"no name", strings.Replace(twoRoles, "workflow: pair\n", "", 1), "workflow: is required"},
		{"bad name", strings.Replace(twoRoles, "workflow: pair", "workflow: Pair Review", 1), "use lowercase"},
		{"unknown key", twoRoles + "retries: 3\n", `unknown key "retries"`},
		{"unknown role key", strings.Replace(twoRoles, "prompt: \"You are A.\"", "promt: \"You are A.\"", 1), `roles.a.promt: unknown key`},
		{"moderator does not compile", strings.Replace(twoRoles, `{"done": true}`, `{"done": true`, 1), "moderator: does not compile"},
		{"no moderator", strings.Replace(twoRoles, "moderator: |\n  last = null ? {\"role\": \"a\", \"instruction\": \"go\"} : {\"done\": true}\n", "", 1), "moderator: is required"},
		{"missing moderator file", strings.Replace(twoRoles, "moderator: |\n  last = null ? {\"role\": \"a\", \"instruction\": \"go\"} : {\"done\": true}\n", "moderator: gone.jsonata\n", 1), "gone.jsonata"},
		{"invalid meta schema", strings.Replace(twoRoles, "type: object", "type: 12", 1), "roles.b.meta: not a valid JSON Schema"},
		{"local role without adapter", strings.Replace(twoRoles, "a: {adapter: example, prompt: \"You are A.\"}", "a: {prompt: \"You are A.\"}", 1), "roles.a.adapter"},
		{"bad binding", strings.Replace(twoRoles, "binding: local", "binding: remote", 1), `unknown binding "remote"`},
		{"bad input type", strings.Replace(twoRoles, "type: integer", "type: int", 1), `unknown type "int"`},
		{"no roles", "workflow: x\nmoderator: '{\"done\": true}'\n", "at least one role"},
		{"not yaml", "workflow: [x\n", "invalid YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("pair.yaml", []byte(tc.src), func(string) ([]byte, error) { return nil, os.ErrNotExist })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "pair.yaml:") {
				t.Fatalf("error %q does not name the file", err)
			}
			var ec interface{ ExitCode() int }
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Fatal("a bad definition must be a config error (exit 2)")
			}
		})
	}
}

func TestInputs(t *testing.T) {
	d := mustParse(t, twoRoles)
	in, err := d.CheckInputs(map[string]any{"topic": "x"})
	if err != nil || in["rounds"] != 2 {
		t.Fatalf("defaults not applied: %v %v", in, err)
	}
	in, err = d.CheckInputs(map[string]any{"topic": "x", "rounds": "5"})
	if err != nil || in["rounds"] != int64(5) {
		t.Fatalf("string from --input not coerced: %v %v", in, err)
	}
	for _, bad := range []map[string]any{
		{},                               // missing required
		{"topic": "x", "rounds": "many"}, // wrong type
		{"topic": "x", "rounds": 1.5},    // not an integer
		{"topic": 3},                     // not a string
		{"topic": "x", "extra": "y"},     // undeclared
	} {
		_, err := d.CheckInputs(bad)
		var ie *InputError
		if !errors.As(err, &ie) || ie.ExitCode() != 2 {
			t.Fatalf("input %v: want an InputError, got %v", bad, err)
		}
	}
}

func TestRefs(t *testing.T) {
	good := map[string]Ref{
		"code-review":                  {Workflow: "code-review"},
		"origin/code-review":           {Remote: "origin", Workflow: "code-review"},
		"origin/code-review#thread-12": {Remote: "origin", Workflow: "code-review", Thread: "thread-12"},
		"code-review#thread-1":         {Workflow: "code-review", Thread: "thread-1"},
	}
	for s, want := range good {
		got, err := ParseRef(s)
		if err != nil || got != want || got.String() != s {
			t.Fatalf("ParseRef(%q) = %+v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "/x", "origin/", "x#", "x#thread-0", "x#12", "a/b/c", "x y", "x#thread-1#thread-2"} {
		if _, err := ParseRef(s); err == nil {
			t.Fatalf("ParseRef(%q) accepted", s)
		}
	}
}

func TestPromptShape(t *testing.T) {
	d := mustParse(t, twoRoles)
	p := Prompt(d, "pair#thread-3", Turn{Step: 2, Role: "b", Instruction: "Check it."}, nil)
	for _, want := range []string{"You are B.", "Check it.", `"required"`, "thread pair#thread-3", "nerve thread messages"} {
		if !strings.Contains(p, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Index(p, "You are B.") > strings.Index(p, "Check it.") {
		t.Fatal("role prompt must come before the instruction")
	}
}

func TestDiscoverAndFind(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pair.yaml"), []byte(twoRoles), 0o600)
	os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("workflow: [\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o600)
	if d, err := Find([]string{dir}, "pair"); err != nil || d.Roles["b"].Schema() == nil {
		t.Fatalf("Find must return a runnable definition: %v", err)
	}
	for _, e := range List([]string{dir}) {
		if e.Name == "pair" && (e.Def == nil || e.Def.Roles["b"].Schema() != nil) {
			t.Fatal("List parses without compiling schemas")
		}
	}
	_, err := Find([]string{dir, filepath.Join(dir, "missing")}, "nope")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(nf.Hint(), "pair") {
		t.Fatalf("want NotFound listing pair, got %v", err)
	}
	if _, err := Find([]string{dir}, "broken"); err == nil || !strings.Contains(err.Error(), "invalid YAML") {
		t.Fatalf("a broken file must report its parse error, got %v", err)
	}
}

// A name two files take is the second file's problem, located there.
func TestDuplicateNameIsTheSecondFilesProblem(t *testing.T) {
	dir := t.TempDir()
	one, two := filepath.Join(dir, "one.yaml"), filepath.Join(dir, "two.yaml")
	os.WriteFile(one, []byte(twoRoles), 0o600)
	os.WriteFile(two, []byte("# the same again\n"+twoRoles), 0o600)
	var bad []Entry
	for _, e := range Discover([]string{dir}) {
		if e.Err != nil {
			bad = append(bad, e)
		}
	}
	var fe *yamlfile.Error
	if len(bad) != 1 || !errors.As(bad[0].Err, &fe) || fe.File != two || fe.Line != 2 || fe.Field != "workflow" ||
		fe.Msg != `"pair" is already the name of `+one+"; rename one of them" {
		t.Fatalf("problems %+v, want one located at %s:2 workflow", bad, two)
	}
}
