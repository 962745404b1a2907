package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/recolabs/gnata"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

// A moderator that calls a function nobody defines fails only when the
// call is reached, with gnata's "T1006: attempted to invoke undefined
// function", which names neither the function nor where it is: gnata's
// errors carry a code and sometimes a token, never a position, and its
// parsed tree is internal. So the source is scanned here, as JSONata's own
// lexer reads it, for the calls `nerve validate` reports and a failed
// evaluation names.

// Call is a call of a $function in a moderator's source.
type Call struct {
	Name string // without the $
	// Line and Col are 1-based; Col counts characters.
	Line, Col int
}

// Where is c's position, "line:col".
func (c Call) Where() string { return strconv.Itoa(c.Line) + ":" + strconv.Itoa(c.Col) }

// builtins is the root environment of gnata's standard library: what
// JSONata defines. nerve registers no functions of its own on the
// moderator (Eval uses gnata's plain environment); were it to, they would
// be looked up here too.
var builtins = sync.OnceValue(func() interface{ Lookup(string) (any, bool) } { return gnata.NewCustomEnv(nil) })

// UnknownCalls returns the calls of functions that neither JSONata nor the
// expression defines, in source order. It is conservative: a name the
// expression assigns anywhere ($f := ...), takes as a lambda parameter or
// binds with @ or # is taken as defined, wherever the call is.
func (m *Moderator) UnknownCalls() []Call {
	calls, bound := scanCalls(m.src)
	var out []Call
	for _, c := range calls {
		if !bound[c.Name] {
			if _, ok := builtins().Lookup(c.Name); !ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// UnknownFunctions reports, at d's moderator field, each call of a
// function that neither JSONata nor the moderator defines: "unknown
// function $f at 1:12", a position in the moderator's source (its file's,
// when the field names one). `nerve validate` shows them; a thread fails
// on such a call only if it is reached, so a definition is not refused.
func (d *Definition) UnknownFunctions() yamlfile.Errors {
	if d.Moderator == nil {
		return nil
	}
	var errs yamlfile.Errors
	for _, c := range d.Moderator.UnknownCalls() {
		at := c.Where()
		if d.modFile != "" {
			at = d.modFile + ":" + at
		}
		errs = append(errs, &yamlfile.Error{File: d.File, Line: d.modLine, Field: "moderator", Msg: "unknown function $" + c.Name + " at " + at})
	}
	return errs
}

// maxProbes bounds the evaluations spent finding which function a failed
// evaluation called: one per distinct name called.
const maxProbes = 16

// errProbe is what a probed function returns: the evaluation reached it.
var errProbe = errors.New("nerve: probed function reached")

// locate names, in err, the undefined function a failed evaluation of doc
// called ("T1006: attempted to invoke undefined function $f at 1:12"); any
// other error comes back as it was. gnata says neither which nor where,
// so each function the source calls that JSONata does not define is in
// turn defined, alone, in the root environment, and the evaluation run
// again: the one that is then reached is the one that was missing (an
// expression's own binding, where it is in scope, hides the probe).
func (m *Moderator) locate(ctx context.Context, doc any, err error) error {
	if !strings.HasPrefix(err.Error(), "T1006: attempted to invoke undefined function") {
		return err
	}
	calls, _ := scanCalls(m.src)
	tried := map[string]bool{}
	for _, c := range calls {
		if tried[c.Name] {
			continue
		}
		if len(tried) == maxProbes || ctx.Err() != nil {
			break
		}
		tried[c.Name] = true
		if _, ok := builtins().Lookup(c.Name); ok {
			continue
		}
		env := gnata.NewCustomEnv(map[string]gnata.CustomFunc{c.Name: func([]any, any) (any, error) { return nil, errProbe }})
		if _, perr := m.expr.EvalWithCustomFuncs(ctx, doc, env); errors.Is(perr, errProbe) {
			return fmt.Errorf("%w $%s at %s", err, c.Name, c.Where())
		}
	}
	return err
}

// token is one lexeme of a JSONata expression.
type token struct {
	kind byte // 'v' variable, 'n' name, 'o' operator, 'l' literal (string, number, regex)
	text string
	pos  int
}

// scanCalls finds the $name calls of src (`$f(...)`, `x ~> $f`) and every
// name src binds.
func scanCalls(src string) ([]Call, map[string]bool) {
	toks := lex(src)
	bound := map[string]bool{}
	var calls []Call
	next := func(i int) token {
		if i+1 < len(toks) {
			return toks[i+1]
		}
		return token{}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == 'n' && (t.text == "function" || t.text == "λ") && next(i).text == "(":
			// The parameter list: every variable up to its ')' is bound.
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == 'v' {
					bound[toks[i].text] = true
				}
			}
		case t.kind == 'o' && (t.text == "@" || t.text == "#") && next(i).kind == 'v':
			bound[next(i).text] = true
			i++
		case t.kind != 'v' || t.text == "" || t.text == "$":
			// not a variable, or the context ($) or the root ($$)
		case next(i).text == ":=":
			bound[t.text] = true
		case next(i).text == "(" || (i > 0 && toks[i-1].text == "~>"):
			line, col := lineCol(src, t.pos)
			calls = append(calls, Call{Name: t.text, Line: line, Col: col})
		}
	}
	return calls, bound
}

// operators are JSONata's operator characters: they end a name.
const operators = ".[]{}(),@#;:?+-*/%|=<>^&!~"

// twoChar are its operators of two characters.
var twoChar = []string{"..", ":=", "!=", ">=", "<=", "**", "~>", "?:", "??"}

// lex splits src into tokens the way JSONata's tokenizer does, as far as
// finding names needs: comments dropped, strings, backquoted names and
// regular expressions kept whole (a '$' in them is no variable).
func lex(src string) []token {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v':
			i++
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return toks
			}
			i += end + 4
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			toks = append(toks, token{'l', src[i:min(j+1, len(src))], i})
			i = j + 1
		case c == '`':
			j := strings.IndexByte(src[i+1:], '`')
			if j < 0 {
				return toks
			}
			toks = append(toks, token{'n', src[i+1 : i+1+j], i})
			i += j + 2
		case c == '/' && regexAllowed(toks):
			j := regexEnd(src, i+1)
			toks = append(toks, token{'l', src[i:j], i})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == 'e' || src[j] == 'E' ||
				(src[j] == '.' && j+1 < len(src) && src[j+1] >= '0' && src[j+1] <= '9') ||
				((src[j] == '-' || src[j] == '+') && (src[j-1] == 'e' || src[j-1] == 'E'))) {
				j++
			}
			toks = append(toks, token{'l', src[i:j], i})
			i = j
		case strings.IndexByte(operators, c) >= 0:
			op := src[i : i+1]
			for _, two := range twoChar {
				if strings.HasPrefix(src[i:], two) {
					op = two
					break
				}
			}
			toks = append(toks, token{'o', op, i})
			i += len(op)
		default:
			j := i + 1
			for j < len(src) && !strings.ContainsRune(" \t\n\r\v", rune(src[j])) && strings.IndexByte(operators, src[j]) < 0 {
				j++
			}
			if c == '$' {
				toks = append(toks, token{'v', src[i+1 : j], i})
			} else {
				toks = append(toks, token{'n', src[i:j], i})
			}
			i = j
		}
	}
	return toks
}

// regexAllowed says whether a '/' after toks starts a regular expression:
// where a value is expected, not after one (then it divides).
func regexAllowed(toks []token) bool {
	if len(toks) == 0 {
		return true
	}
	t := toks[len(toks)-1]
	switch t.kind {
	case 'o':
		switch t.text {
		case ")", "]", "}", "*", "**", "%": // these end a value
			return false
		}
		return true
	case 'n':
		return t.text == "and" || t.text == "or" || t.text == "in"
	}
	return false
}

// regexEnd is the end of the regular expression whose body starts at i:
// past its closing '/' (one outside brackets, not escaped) and its flags.
func regexEnd(src string, i int) int {
	depth := 0
	for ; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '/':
			if depth <= 0 {
				i++
				for i < len(src) && (src[i] == 'i' || src[i] == 'm') {
					i++
				}
				return i
			}
		}
	}
	return len(src)
}

// lineCol is the 1-based line and character column of byte offset off.
func lineCol(src string, off int) (int, int) {
	before := src[:off]
	line := strings.Count(before, "\n") + 1
	start := strings.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCountInString(before[start:]) + 1
}
