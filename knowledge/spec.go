package knowledge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"
)

// SpecFile is the name of the committed file at a repository's root.
const SpecFile = "knowledge.yaml"

// DefaultMaxFileSize is the size above which a file is never indexed: such
// files are generated data far more often than knowledge.
const DefaultMaxFileSize = 1 << 20

// DefaultInclude is used when knowledge.yaml is absent or lists no include:
// source code, docs and build files of the common languages.
var DefaultInclude = []string{
	"**/*.{go,ts,tsx,mts,cts,js,jsx,mjs,cjs,py,pyi,rs,java,kt,kts,scala,c,h,cc,cpp,cxx,hpp,hh,cs,rb,php,swift,m,mm,lua,ex,exs,erl,hs,ml,clj,dart,r,jl,zig,nim,sh,bash,zsh,fish,ps1,sql,proto,graphql,tf,nix}",
	"**/*.{md,mdx,markdown,rst,adoc,txt,org}",
	"**/*.{yaml,yml,toml,ini,cfg,json,jsonc,xml,html,css,scss,vue,svelte}",
	"**/{Makefile,Dockerfile,Justfile,Rakefile,Gemfile,BUILD,WORKSPACE,CMakeLists.txt,go.mod}",
	"**/*.{mk,cmake,gradle,bzl}",
}

// DefaultExclude is used when knowledge.yaml has no exclude: dependency,
// build and cache directories, lock files and generated or minified code.
// Build output directories are excluded at the root only, since build/ or
// bin/ deeper down is often source (Go's go/build).
var DefaultExclude = []string{
	"node_modules/", "vendor/", "__pycache__/", ".venv/", ".tox/", ".mypy_cache/",
	".pytest_cache/", ".next/", ".nuxt/", ".cache/", ".idea/", ".vscode/",
	"/dist/", "/build/", "/out/", "/target/", "/coverage/", "/bin/", "/obj/", "/venv/",
	"*.min.js", "*.min.css", "*.map", "*.lock", "package-lock.json", "go.sum",
	"*.pb.go", "*_gen.go", "*.generated.*", "*.snap",
}

// alwaysSkipped directories are never walked, whatever knowledge.yaml says.
var alwaysSkipped = map[string]bool{".git": true, ".nerve": true, ".hg": true, ".svn": true}

// Spec is a parsed knowledge.yaml, defaults applied.
type Spec struct {
	Include     []string
	Exclude     []string
	MaxFileSize int64
	// File is the knowledge.yaml read, "" when the defaults were used.
	File string

	include, exclude []pattern
}

// LoadSpec reads root/knowledge.yaml; an absent file gives the defaults.
func LoadSpec(root string) (*Spec, error) {
	file := filepath.Join(root, SpecFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return ParseSpec("", nil)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return ParseSpec(file, data)
}

// ParseSpec parses the content of a knowledge.yaml named file.
func ParseSpec(file string, data []byte) (*Spec, error) {
	s := &Spec{File: file, MaxFileSize: DefaultMaxFileSize}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &SpecError{File: file, Line: yamlErrLine(err), Msg: yamlErrMsg(err)}
	}
	var haveInclude, haveExclude bool
	if len(doc.Content) > 0 {
		top := doc.Content[0]
		if top.Kind != yaml.MappingNode {
			if !(top.Kind == yaml.ScalarNode && top.Tag == "!!null") {
				return nil, &SpecError{File: file, Line: top.Line, Msg: "want a mapping with include, exclude, max_file_size"}
			}
		} else {
			for i := 0; i+1 < len(top.Content); i += 2 {
				k, v := top.Content[i], top.Content[i+1]
				var err error
				switch k.Value {
				case "include":
					s.Include, err = globList(file, "include", v)
					haveInclude = true
				case "exclude":
					s.Exclude, err = globList(file, "exclude", v)
					haveExclude = true
				case "max_file_size":
					s.MaxFileSize, err = sizeField(file, v)
				default:
					err = &SpecError{File: file, Line: k.Line, Field: k.Value, Msg: "unknown field (want include, exclude, max_file_size)"}
				}
				if err != nil {
					return nil, err
				}
			}
		}
	}
	if !haveInclude || len(s.Include) == 0 {
		s.Include = DefaultInclude
	}
	if !haveExclude {
		s.Exclude = DefaultExclude
	}
	s.include = compileAll(s.Include)
	s.exclude = compileAll(s.Exclude)
	return s, nil
}

func globList(file, field string, v *yaml.Node) ([]string, error) {
	var nodes []*yaml.Node
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return nil, nil
	case v.Kind == yaml.ScalarNode:
		nodes = []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode:
		nodes = v.Content
	default:
		return nil, &SpecError{File: file, Line: v.Line, Field: field, Msg: "want a list of globs"}
	}
	out := make([]string, 0, len(nodes))
	for i, n := range nodes {
		name := fmt.Sprintf("%s[%d]", field, i)
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" && n.Tag != "!!int" {
			return nil, &SpecError{File: file, Line: n.Line, Field: name, Msg: "want a glob string"}
		}
		g := strings.TrimSpace(n.Value)
		if g == "" {
			return nil, &SpecError{File: file, Line: n.Line, Field: name, Msg: "empty glob"}
		}
		if !doublestar.ValidatePattern(compile(g).glob) {
			return nil, &SpecError{File: file, Line: n.Line, Field: name, Msg: fmt.Sprintf("bad glob %q", g)}
		}
		out = append(out, g)
	}
	return out, nil
}

func sizeField(file string, v *yaml.Node) (int64, error) {
	bad := &SpecError{File: file, Line: v.Line, Field: "max_file_size", Msg: fmt.Sprintf("%q is not a size (want bytes or e.g. 512KiB, 2MB)", v.Value)}
	if v.Kind != yaml.ScalarNode {
		return 0, bad
	}
	n, err := parseSize(v.Value)
	if err != nil || n <= 0 {
		return 0, bad
	}
	return n, nil
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	return n * mult, nil
}

// yamlErrLine digs the line out of a yaml.v3 syntax error ("yaml: line 3: ...").
func yamlErrLine(err error) int {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		rest := msg[i+5:]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if n, err := strconv.Atoi(rest[:j]); err == nil {
			return n
		}
	}
	return 0
}

func yamlErrMsg(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
		msg = msg[i+2:]
	}
	return "invalid YAML: " + msg
}

// pattern is one glob of knowledge.yaml, compiled to the full-path form
// doublestar matches.
type pattern struct {
	glob string
	// dir is set for a pattern that names a whole directory ("dist/**",
	// "node_modules/"): the walk prunes such directories.
	dir string
}

// compile turns a knowledge.yaml glob into a doublestar pattern over paths
// relative to the repository root, with .gitignore's reading: a glob with
// no slash (other than a trailing one) matches at any depth; "dir/" means
// everything under dir; a leading "/" or "./" anchors at the root.
func compile(g string) pattern {
	g = strings.TrimPrefix(g, "./")
	anchored := strings.HasPrefix(g, "/")
	g = strings.TrimPrefix(g, "/")
	if strings.HasSuffix(g, "/") {
		g += "**"
	}
	trimmed := strings.TrimSuffix(g, "/**")
	if !anchored && !strings.Contains(trimmed, "/") {
		g = "**/" + g
	}
	p := pattern{glob: g}
	if strings.HasSuffix(g, "/**") {
		p.dir = strings.TrimSuffix(g, "/**")
	}
	return p
}

func compileAll(gs []string) []pattern {
	out := make([]pattern, len(gs))
	for i, g := range gs {
		out[i] = compile(g)
	}
	return out
}

// Wants reports whether the file at rel (slash-separated, relative to the
// root) is selected: some include matches and no exclude does.
func (s *Spec) Wants(rel string) bool {
	in := false
	for _, p := range s.include {
		if ok, _ := doublestar.Match(p.glob, rel); ok {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, p := range s.exclude {
		if ok, _ := doublestar.Match(p.glob, rel); ok {
			return false
		}
	}
	return true
}

// PrunesDir reports whether the directory at rel is excluded as a whole, so
// the walk need not enter it.
func (s *Spec) PrunesDir(rel string) bool {
	if alwaysSkipped[filepath.Base(rel)] {
		return true
	}
	for _, p := range s.exclude {
		if p.dir == "" {
			continue
		}
		if ok, _ := doublestar.Match(p.dir, rel); ok {
			return true
		}
	}
	return false
}
