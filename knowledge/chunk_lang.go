package knowledge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"sync"
)

var (
	goTop = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:func\s+(?:\(\s*(?:\w+\s+)?\*?(\w+)[^)]*\)\s*)?(\w+)|(?:type|var|const)\s+(\w+)|(?:type|var|const)\s*\()`)
	})
	tsTop = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\*?|class|interface|type|enum|namespace|module|const|let|var)\s+([A-Za-z_$][\w$]*)`)
	})
	tsIn = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\s{1,12}(?:(?:public|private|protected|static|readonly|async|abstract|override|get|set|export|function)\s+)*\*?([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\s*\([^;]*$`)
	})
	pyTop = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:async\s+def|def|class)\s+(\w+)`) })
	pyIn  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s+(?:async\s+def|def|class)\s+(\w+)`) })
	mdHdr = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`) })
)

var commentPrefixes = []string{"//", "/*", "*", "*/", "@"}

// tsKeywords look like calls at the start of a line but start no method.
var tsKeywords = map[string]bool{
	"if": true, "for": true, "while": true, "switch": true, "catch": true, "return": true,
	"await": true, "new": true, "typeof": true, "super": true, "this": true, "function": true,
	"else": true, "do": true, "try": true, "throw": true, "yield": true, "delete": true,
}

// goBoundaries finds top-level declarations with go/parser, their doc
// comments included; a file that does not parse falls back to the line
// heuristic.
func goBoundaries(content []byte, lines []string) []boundary {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", content, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil || f == nil {
		return scanBoundaries(lines, goTop(), []string{"//"})
	}
	var out []boundary
	for _, d := range f.Decls {
		pos, sym := d.Pos(), ""
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc != nil {
				pos = d.Doc.Pos()
			}
			sym = d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				if r := recvName(d.Recv.List[0].Type); r != "" {
					sym = r + "." + sym
				}
			}
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
			if d.Doc != nil {
				pos = d.Doc.Pos()
			}
			sym = genDeclNames(d)
		}
		out = append(out, boundary{line: fset.PositionFor(pos, false).Line - 1, symbol: sym})
	}
	return out
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// genDeclNames lists what a type, var or const declaration names, the
// first dozen of a long block.
func genDeclNames(d *ast.GenDecl) string {
	var names []string
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			names = append(names, s.Name.Name)
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.Name != "_" {
					names = append(names, n.Name)
				}
			}
		}
		if len(names) >= 12 {
			break
		}
	}
	return strings.Join(names, " ")
}

// goInner has nothing to offer inside a long Go function: windows do.
func goInner([]string, section) []boundary { return nil }

// scanBoundaries is the line heuristic: a unit starts at a line that re
// matches, pulled up over the comment (or decorator) lines right above it.
// The symbol is re's last non-empty group.
func scanBoundaries(lines []string, re *regexp.Regexp, attach []string) []boundary {
	var out []boundary
	for i, l := range lines {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		out = append(out, boundary{line: pullUp(lines, i, 0, attach), symbol: lastGroup(m)})
	}
	return out
}

// pullUp moves a unit's first line up over attached lines (doc comments,
// decorators) but not past floor.
func pullUp(lines []string, i, floor int, attach []string) int {
	for i > floor {
		prev := strings.TrimSpace(lines[i-1])
		if prev == "" || !hasAnyPrefix(prev, attach) {
			break
		}
		i--
	}
	return i
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func lastGroup(m []string) string {
	for i := len(m) - 1; i > 0; i-- {
		if m[i] != "" {
			if i == 2 && m[1] != "" { // Go method: Recv.Name
				return m[1] + "." + m[2]
			}
			return m[i]
		}
	}
	return ""
}

// innerBoundaries finds nested units (methods) inside a long section.
func innerBoundaries(lines []string, s section, re *regexp.Regexp, attach []string, skip map[string]bool) []boundary {
	var out []boundary
	for i := s.start + 1; i < s.end; i++ {
		m := re.FindStringSubmatch(lines[i])
		if m == nil || skip[m[1]] {
			continue
		}
		out = append(out, boundary{line: pullUp(lines, i, s.start+1, attach), symbol: m[1]})
	}
	return out
}

func tsInner(lines []string, s section) []boundary {
	return innerBoundaries(lines, s, tsIn(), commentPrefixes, tsKeywords)
}

func pyInner(lines []string, s section) []boundary {
	return innerBoundaries(lines, s, pyIn(), []string{"#", "@"}, nil)
}

// markdownBoundaries starts a section at every ATX heading outside fenced
// code; its symbol is the heading's trail ("Install > Linux").
func markdownBoundaries(lines []string) []boundary {
	var out []boundary
	var trail []string // trail[k] is the heading of level k+1
	fence := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		m := mdHdr().FindStringSubmatch(l)
		if m == nil {
			continue
		}
		level := len(m[1])
		for len(trail) < level {
			trail = append(trail, "")
		}
		trail = trail[:level]
		trail[level-1] = m[2]
		var parts []string
		for _, h := range trail {
			if h != "" {
				parts = append(parts, h)
			}
		}
		out = append(out, boundary{line: i, symbol: strings.Join(parts, " > ")})
	}
	return out
}
