package validation_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/config"
	"github.com/nerve-agents/nerve/config/validation"
)

// home makes a NERVE_HOME with nerve.yaml and workflow files, and loads it.
func home(t *testing.T, yaml string, workflows map[string]string) (string, *config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "nerve.yaml"), yaml)
	for name, src := range workflows {
		write(t, filepath.Join(dir, "workflows", name), src)
	}
	getenv := func(k string) string {
		if k == "NERVE_HOME" {
			return dir
		}
		return ""
	}
	cfg, err := config.Load(config.LoadOptions{Getenv: getenv})
	return dir, cfg, err
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

const local = `workflow: %s
moderator: |
  last = null ? {"role": "a", "instruction": "go"} : {"done": true}
inputs:
  topic: {type: string, required: true}
roles:
  a: {adapter: %s, prompt: "You are A."}
`

func def(name, adapter string) string {
	return strings.Replace(strings.Replace(local, "%s", name, 1), "%s", adapter, 1)
}

const reflexes = `agent: {name: t}
senses:
  - {name: tick, kind: interval, every: 1h}
reflexes:
  - {on: tick, do: workflow, workflow: report, input: {topic: x}}
`

func TestValidSetup(t *testing.T) {
	_, cfg, err := home(t, reflexes, map[string]string{"report.yaml": def("report", "claude")})
	if err != nil {
		t.Fatal(err)
	}
	rep := validation.Check(cfg)
	if !rep.OK() || len(rep.Workflows) != 1 || rep.Workflows[0].Def == nil {
		t.Fatalf("report: %+v problems %v", rep, rep.Problems())
	}
}

func TestProblemsByFile(t *testing.T) {
	yaml := reflexes + "  - {on: tick, do: workflow, workflow: nosuch}\n" +
		"  - {on: tick, do: workflow, workflow: report, input: {nope: 1}}\n" +
		"  - {on: tick, do: workflow, workflow: cloudy}\n"
	_, cfg, err := home(t, yaml, map[string]string{
		"report.yaml": def("report", "claude"),
		"bad.yaml":    def("bad", "nosuch-adapter"),
		"exec.yaml":   def("execy", "exec"), // built in, but needs a command
		"broken.yaml": "workflow: broken\nroles: {}\nmoderator: $count(\n",
		"cloudy.yaml": strings.Replace(def("cloudy", "claude"), "moderator:", "binding: cloud\nmoderator:", 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := validation.Check(cfg)
	wantConfig := []string{
		`reflexes[1].workflow: unknown workflow "nosuch"`,
		`reflexes[2].input: `,
		`reflexes[3].workflow: workflow "cloudy" has binding cloud`,
	}
	got := rep.Config.Error()
	if len(rep.Config) != len(wantConfig) {
		t.Fatalf("nerve.yaml problems: %d, want %d: %v", len(rep.Config), len(wantConfig), rep.Config)
	}
	for i, w := range wantConfig {
		if s := rep.Config[i].Error(); !strings.Contains(s, w) || !strings.Contains(s, "nerve.yaml") {
			t.Errorf("problem %d %q, want %q in nerve.yaml (all: %s)", i, s, w, got)
		}
	}
	byName := map[string]validation.Workflow{}
	for _, w := range rep.Workflows {
		byName[w.Name] = w
	}
	for name, want := range map[string]string{
		"bad":    `roles.a.adapter: unknown adapter "nosuch-adapter" (built in: claude, codex, gemini, cursor, hermes, qwen, opencode, copilot, pi, crush, kilo, droid, continue, auggie, exec;`,
		"execy":  `roles.a.adapter: adapter "exec": type exec needs a command`,
		"broken": "moderator",
	} {
		w := byName[name]
		var all []string
		for _, p := range w.Problems {
			all = append(all, p.Error())
		}
		if s := strings.Join(all, "\n"); len(all) == 0 || !strings.Contains(s, want) || !strings.Contains(s, w.File) {
			t.Errorf("workflow %s: problems %v, want %q naming its file", name, w.Problems, want)
		}
	}
	for _, name := range []string{"report", "cloudy"} {
		if p := byName[name].Problems; len(p) > 0 {
			t.Errorf("workflow %s: unexpected problems %v", name, p)
		}
	}
	if rep.OK() {
		t.Fatal("OK with problems")
	}
}

// A nerve.yaml that does not load is reported, and the workflows in the
// default directory are checked all the same.
func TestCheckLoadedGoesOn(t *testing.T) {
	dir, cfg, err := home(t, "agent: {name: t}\nadapters:\n  x: {type: clod}\n", map[string]string{"w.yaml": def("w", "nosuch")})
	if err == nil {
		t.Fatal("loaded a bad nerve.yaml")
	}
	rep := validation.CheckLoaded(cfg, err, dir)
	if len(rep.Config) != 1 || !strings.Contains(rep.Config[0].Error(), `adapters.x.type: unknown type "clod"`) || rep.Config[0].Line != 3 {
		t.Fatalf("nerve.yaml problems: %v", rep.Config)
	}
	if len(rep.Workflows) != 1 || len(rep.Workflows[0].Problems) != 1 {
		t.Fatalf("workflows: %+v", rep.Workflows)
	}
}

// Files named are checked after the discovered workflows, against the
// same configuration (here the defaults, nerve.yaml being bad), and a
// missing one is a problem of the report.
func TestCheckLoadedFiles(t *testing.T) {
	dir, cfg, err := home(t, "adapters:\n  x: {type: clod}\n", map[string]string{"w.yaml": def("w", "claude")})
	named := filepath.Join(t.TempDir(), "named.yaml")
	write(t, named, def("named", "phantom"))
	missing := filepath.Join(dir, "missing.yaml")
	rep := validation.CheckLoaded(cfg, err, dir, named, missing)
	if len(rep.Workflows) != 3 || rep.Workflows[0].Name != "w" || len(rep.Workflows[0].Problems) != 0 {
		t.Fatalf("workflows: %+v", rep.Workflows)
	}
	if w := rep.Workflows[1]; w.Name != "named" || w.Def == nil || len(w.Problems) != 1 ||
		!strings.Contains(w.Problems[0].Error(), `roles.a.adapter: unknown adapter "phantom"`) {
		t.Fatalf("named file: %+v", w)
	}
	if w := rep.Workflows[2]; w.File != missing || w.Def != nil || len(w.Problems) != 1 ||
		!strings.Contains(w.Problems[0].Error(), "no such file") {
		t.Fatalf("missing file: %+v", w)
	}
}
