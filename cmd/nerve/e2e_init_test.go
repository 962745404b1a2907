package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestE2EInitCreatesAndIsIdempotent(t *testing.T) {
	e := newEnv(t)
	home := filepath.Join(e.home, "fresh")
	e.extra = []string{"NERVE_HOME=" + home}
	first := e.must(0, "init", "--name", "laptop-1")
	for path, mode := range map[string]os.FileMode{home: 0o700 | os.ModeDir, home + "/nerve.yaml": 0o600, home + "/workflows": 0o700 | os.ModeDir} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode() != mode {
			t.Fatalf("%s: mode %v, want %v (%v)", path, fi.Mode(), mode, err)
		}
	}
	cfg, _ := os.ReadFile(home + "/nerve.yaml")
	if !strings.Contains(string(cfg), "name: laptop-1") || !strings.Contains(string(cfg), "# ") {
		t.Fatalf("nerve.yaml:\n%s", cfg)
	}
	e.must(0, "validate")
	second := e.must(0, "init", "--name", "other-name")
	again, _ := os.ReadFile(home + "/nerve.yaml")
	if string(again) != string(cfg) {
		t.Fatal("a second init must not change nerve.yaml")
	}
	if want := "--name other-name not used: " + home + "/nerve.yaml names this agent laptop-1 and was left as it is; edit agent.name there to rename it\n"; second.stderr != want {
		t.Fatalf("a second init with another --name must say it kept the name:\n%q\nwant %q", second.stderr, want)
	}
	if !strings.Contains(second.stdout, "exists (left as it is)") || strings.Count(second.stdout, "\n") != strings.Count(first.stdout, "\n") {
		t.Fatalf("second run:\n%s\nfirst run:\n%s", second.stdout, first.stdout)
	}
}

func TestE2EInitChecks(t *testing.T) {
	e := newEnv(t)
	bin := filepath.Join(e.home, "bin")
	e.write("bin/claude", "#!/bin/sh\n[ \"$1\" = --version ] && echo '2.1.330 (Claude Code)'\n")
	e.write("bin/gemini", "#!/bin/sh\necho 'config broken' >&2\nexit 3\n")
	// Found on PATH, named nowhere: listed too, not needed.
	e.write("bin/copilot", "#!/bin/sh\n[ \"$1\" = --version ] && printf 'GitHub Copilot CLI 1.0.102.\\nRun copilot update to check for updates.\\n'\n")
	e.extra = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	e.write("nerve.yaml", `adapters:
  claude: {permissions: read-only}
  gemini: {}
  spare: {type: codex}
remotes:
  origin: {url: "http://127.0.0.1:1"}
`)
	e.write("workflows/w.yaml", "workflow: w\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: claude, prompt: p}\n")

	// Only warnings: the missing codex and gemini's failure are not needed.
	r := e.must(0, "init", "--json")
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name, Kind, Detail, Hint string
			OK, Needed               bool
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !rep.OK {
		t.Fatalf("init --json: %v\n%s", err, r)
	}
	byName := map[string]int{}
	for i, c := range rep.Checks {
		byName[c.Name] = i
	}
	claude := rep.Checks[byName["adapter claude"]]
	if !claude.OK || !claude.Needed || !strings.Contains(claude.Detail, "2.1.330") || !strings.Contains(claude.Detail, "permissions read-only") {
		t.Fatalf("claude check: %+v", claude)
	}
	if c, ok := byName["adapter copilot"]; !ok || !rep.Checks[c].OK || rep.Checks[c].Needed ||
		!strings.Contains(rep.Checks[c].Detail, "GitHub Copilot CLI 1.0.102. at "+bin+"/copilot · permissions workspace") {
		t.Fatalf("copilot, found on PATH: %+v", rep.Checks)
	}
	if _, ok := byName["adapter pi"]; ok {
		t.Fatalf("pi is not on PATH, yet listed: %+v", rep.Checks)
	}
	if g := rep.Checks[byName["adapter gemini"]]; g.OK || g.Needed || !strings.Contains(g.Detail, "config broken") {
		t.Fatalf("gemini check: %+v", g)
	}
	if s := rep.Checks[byName["adapter spare"]]; s.OK || !strings.Contains(s.Hint, "npm install -g @openai/codex") {
		t.Fatalf("codex check: %+v", s)
	}
	if o := rep.Checks[byName["remote origin"]]; o.OK || o.Needed || !strings.Contains(o.Detail, "connection refused") || !strings.Contains(o.Hint, "nerve khala serve") {
		t.Fatalf("remote check: %+v", o)
	}

	// A workflow that needs codex makes it fatal; so does a sense needing origin.
	e.write("workflows/v.yaml", "workflow: v\nmoderator: '{\"done\": true}'\nroles:\n  r: {adapter: codex, prompt: p}\n")
	r = e.must(1, "init")
	if !strings.Contains(r.stdout, "✗ adapter codex") || !strings.Contains(r.stdout, "needed by workflow v role r") || !strings.Contains(r.stdout, "not ready") {
		t.Fatalf("init with a needed missing adapter:\n%s", r)
	}
	os.Remove(filepath.Join(e.home, "workflows/v.yaml"))
	e.write("nerve.yaml", "remotes:\n  origin: {url: \"http://127.0.0.1:1\"}\nsenses:\n  - {name: q, kind: khala, remote: origin}\n")
	r = e.must(1, "init")
	if !strings.Contains(r.stdout, "✗ remote origin") {
		t.Fatalf("needed remote down:\n%s", r)
	}
}

func TestE2EInitBadFlagsAndRemotes(t *testing.T) {
	e := newEnv(t)
	e.must(2, "init", "--remote", "origin")
	e.must(2, "init", "--enroll-token", "x")
	e.must(2, "remote", "add", "origin", "ftp://x")
	e.must(0, "remote", "add", "origin", "http://127.0.0.1:1")
	list := e.must(0, "workflow", "list")
	if !strings.Contains(list.stdout, "origin/") || !strings.Contains(list.stdout, "unreachable: connection refused") {
		t.Fatalf("an unreachable remote must be shown as such: %s", list)
	}
	listJSON := e.must(0, "workflow", "list", "--json")
	if !strings.Contains(listJSON.stdout, `{"ref":"origin/","name":null,"remote":"origin","binding":null,"description":null,"error":"unreachable: connection refused`) {
		t.Fatalf("workflow list --json: %s", listJSON)
	}
	r := e.must(0, "remote", "list", "--json")
	if !strings.Contains(r.stdout, `"url":"http://127.0.0.1:1"`) || !strings.Contains(r.stdout, `"enrolled":false`) {
		t.Fatalf("remote list: %s", r)
	}
	e.must(0, "remote", "remove", "origin")
	e.must(2, "remote", "remove", "origin")
	// A refused connection on enrollment is one line with a hint.
	r = e.must(1, "init", "--remote", "origin=http://127.0.0.1:1", "--enroll-token", "t")
	if !strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "hint:") {
		t.Fatalf("enroll against nothing: %s", r)
	}
}

func TestE2EInitExampleLoads(t *testing.T) {
	e := newEnv(t)
	r := e.must(0, "init", "--example")
	e.write("nerve.yaml", r.stdout)
	// The example names a workflow ("report") this home does not have: the
	// only problem validate may find.
	v := e.must(2, "validate")
	if !strings.Contains(v.stdout, `unknown workflow "report"`) || strings.Count(strings.TrimSpace(v.stdout), "\n") != 0 {
		t.Fatalf("validate of the example: %s", v)
	}
}

// A person's role (human: true) has no adapter: init does not look for one.
func TestE2EInitHumanRole(t *testing.T) {
	e := newEnv(t)
	src, err := os.ReadFile(repoFile(t, "examples/release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e.write("workflows/release.yaml", string(src))
	r := e.must(0, "init")
	if strings.Contains(r.stdout, "✗") || !strings.Contains(r.stdout, "✓ workflow release") {
		t.Fatalf("init with a human role:\n%s", r)
	}
}

func TestInitHelpShowsARealEnrollToken(t *testing.T) {
	if ex := newCmdInit(&Factory{}, nil).Example; !strings.Contains(ex, "--enroll-token khala_enroll_") {
		t.Fatalf("init's example enrollment token is not Khala's form (khala_enroll_...):\n%s", ex)
	}
}

// A name nerve.yaml would refuse (or that would break it) is refused
// before anything is written.
func TestE2EInitRefusesBadName(t *testing.T) {
	e := newEnv(t)
	home := filepath.Join(e.home, "fresh")
	e.extra = []string{"NERVE_HOME=" + home}
	for _, name := range []string{`bad name: "x"`, "two\nlines", "-x", ""} {
		r := e.must(2, "init", "--name", name)
		if want := fmt.Sprintf("nerve: --name %q: ", name); !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "hint: e.g. --name laptop-1") {
			t.Fatalf("init --name %q:\n%s", name, r)
		}
		if _, err := os.Stat(home); err == nil {
			t.Fatalf("init --name %q created %s", name, home)
		}
	}
	// A valid name YAML would read as another type is quoted.
	e.must(0, "init", "--name", "null")
	if r := e.must(0, "validate", "--json"); !strings.Contains(r.stdout, `"ok":true`) {
		t.Fatalf("validate after init --name null: %s", r)
	}
}
