package knowledge

import (
	"errors"
	"strings"
	"testing"
)

func TestKnowledgeSpecGlobs(t *testing.T) {
	s, err := ParseSpec("knowledge.yaml", []byte(`
include:
  - "src/**/*.ts"
  - "docs/**/*.md"
  - "*.md"
exclude:
  - "node_modules/"
  - "*.test.ts"
  - "/docs/drafts/**"
max_file_size: 64KiB
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxFileSize != 64<<10 {
		t.Errorf("MaxFileSize = %d", s.MaxFileSize)
	}
	want := map[string]bool{
		"src/a.ts":                    true,
		"src/deep/er/b.ts":            true,
		"src/a.test.ts":               false, // no slash: any depth
		"lib/a.ts":                    false,
		"README.md":                   true,
		"pkg/notes/README.md":         true, // "*.md" matches at any depth, as in .gitignore
		"docs/guide/x.md":             true,
		"docs/drafts/y.md":            false,
		"src/node_modules/x/index.ts": false,
		"node_modules/x/README.md":    false,
		"src/a.js":                    false,
	}
	for p, w := range want {
		if got := s.Wants(p); got != w {
			t.Errorf("Wants(%q) = %v, want %v", p, got, w)
		}
	}
	for p, w := range map[string]bool{"node_modules": true, "src/node_modules": true, "docs/drafts": true, "docs": false, ".git": true, "sub/.nerve": true} {
		if got := s.PrunesDir(p); got != w {
			t.Errorf("PrunesDir(%q) = %v, want %v", p, got, w)
		}
	}
}

func TestKnowledgeSpecDefaults(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "include: []\n", "exclude:\n  - '*.md'\n"} {
		s, err := ParseSpec("knowledge.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if !s.Wants("cmd/main.go") || !s.Wants("web/src/app.tsx") || !s.Wants("Makefile") {
			t.Errorf("%q: default include misses source files", src)
		}
		if s.Wants("logo.png") || s.Wants("bin/tool.exe") {
			t.Errorf("%q: default include takes binaries", src)
		}
	}
	s, _ := ParseSpec("", nil)
	for _, p := range []string{"node_modules/x/a.js", "web/node_modules/x/a.js", "vendor/x/a.go", "go.sum", "dist/app.js", "x/y.min.js"} {
		if s.Wants(p) {
			t.Errorf("default exclude lets %q in", p)
		}
	}
	if !s.Wants("go/build/build.go") {
		t.Errorf("default exclude drops a nested build/ source dir")
	}
}

func TestKnowledgeSpecBadFile(t *testing.T) {
	cases := []struct{ src, want string }{
		{"include: [\"src/**\"\n", "knowledge.yaml:"},
		{"include:\n  - \"src/[\"\n", `knowledge.yaml:2: include[0]: bad glob "src/["`},
		{"include:\n  - ok/**\n  - {a: b}\n", "knowledge.yaml:3: include[1]: want a glob string"},
		{"exclude: true\n", "knowledge.yaml:1: exclude[0]: want a glob string"},
		{"exclude: [x]\nexlude: [x]\n", "knowledge.yaml:2: exlude: unknown field"},
		{"max_file_size: lots\n", "knowledge.yaml:1: max_file_size:"},
		{"- a\n- b\n", "knowledge.yaml:1: want a mapping"},
		{"include: {a: b}\n", "knowledge.yaml:1: include: want a list of globs"},
	}
	for _, c := range cases {
		_, err := ParseSpec("knowledge.yaml", []byte(c.src))
		var se *SpecError
		if !errors.As(err, &se) {
			t.Errorf("%q: err = %v, want a SpecError", c.src, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: err = %q, want prefix %q", c.src, err, c.want)
		}
		if se.ExitCode() != 2 {
			t.Errorf("exit code %d", se.ExitCode())
		}
	}
}
