package khalapg

import (
	"path"
	"regexp"
	"strings"

	"github.com/nerve-agents/nerve/khala/khaladb"
)

// repoFilter is a claim's repository filter as the claim statements take
// it: a mode ("" any, "declared", "globs") and, for globs, each glob as
// an anchored PostgreSQL regular expression. A glob that is not valid
// (the server refuses those before they get here) matches nothing.
func repoFilter(f *khaladb.RepoFilter) (mode string, patterns []string) {
	patterns = []string{}
	switch {
	case f == nil:
		return "", patterns
	case len(f.Globs) == 0:
		return "declared", patterns
	}
	for _, g := range f.Globs {
		if re, ok := globRegexp(g); ok {
			patterns = append(patterns, re)
		}
	}
	return "globs", patterns
}

// globRegexp translates a path.Match pattern into the regular expression
// that matches the same strings: * and ? never match a slash, classes
// keep their ranges and ^ negation, and every other character stands
// for itself.
func globRegexp(glob string) (string, bool) {
	if _, err := path.Match(glob, ""); err != nil {
		return "", false
	}
	var b strings.Builder
	b.WriteString("^")
	inClass := false
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case c == '\\' && i+1 < len(glob):
			i++
			b.WriteString(literal(glob[i]))
		case inClass && c == ']':
			inClass = false
			b.WriteByte(']')
		case inClass && c == '-':
			b.WriteByte('-')
		case inClass && c == '^' && glob[i-1] == '[':
			b.WriteByte('^')
		case inClass:
			b.WriteString(literal(c))
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			inClass = true
			b.WriteByte('[')
		default:
			b.WriteString(literal(c))
		}
	}
	b.WriteString("$")
	return b.String(), true
}

// literal is byte c as a regular expression that matches only it.
func literal(c byte) string {
	if c >= 0x80 {
		return string([]byte{c}) // part of a UTF-8 sequence: never special
	}
	return regexp.QuoteMeta(string(c))
}
