package yamlfile

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Error is a problem in a YAML file, located by line and field path.
// It is a configuration error: exit status 2.
type Error struct {
	File  string
	Line  int
	Field string // dotted path, e.g. adapters.claude-fast.timeout
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ExitCode makes a bad file a configuration error.
func (e *Error) ExitCode() int { return 2 }

// Errors is every problem found in one pass, so a user fixes them all
// at once rather than one per run.
type Errors []*Error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	return fmt.Sprintf("%s (and %d more problems)", es[0].Error(), len(es)-1)
}

// ExitCode makes bad files a configuration error.
func (es Errors) ExitCode() int { return 2 }

// Lines maps a dotted field path to the line it was written on, so checks
// made after decoding can still point at the file.
type Lines map[string]int

// Line returns the line of path or of its nearest written parent.
func (l Lines) Line(path string) int {
	for path != "" {
		if n, ok := l[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// Decode decodes YAML data into v, rejecting unknown keys and wrong
// types with file, line and field. It returns the line of every field.
// With problems, v still holds every value that decoded.
func Decode(file string, data []byte, v any) (Lines, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, SyntaxError(file, err)
	}
	lines := Lines{}
	if len(root.Content) == 0 {
		return lines, nil // empty file: defaults only
	}
	doc := root.Content[0]
	var errs Errors
	var values []value
	walkKnown(file, doc, reflect.TypeOf(v).Elem(), "", lines, &errs, &values)
	// Unknown keys do not stop the decoding (yaml.v3 skips them), so v holds
	// what the file got right and a caller can check it for more problems.
	if err := doc.Decode(v); err != nil {
		errs = append(errs, typeErrors(file, err, values)...)
	} else {
		errs = append(errs, fractions(file, values)...)
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
		return lines, errs
	}
	return lines, nil
}

// fractions reports the numbers with a point given to whole-number
// fields, which yaml.v3 truncates without a word (max_concurrent_turns:
// 1.5 ran one turn at a time). A type with its own UnmarshalYAML (Count,
// Duration) judges its value itself.
func fractions(file string, values []value) Errors {
	var errs Errors
	for _, v := range values {
		t := v.t
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if !isWhole(t.Kind()) || reflect.PointerTo(t).Implements(unmarshalerType) {
			continue
		}
		if n := v.node; n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
			errs = append(errs, &Error{File: file, Line: n.Line, Field: v.path, Msg: mismatch("float", n.Value, t, t.String())})
		}
	}
	return errs
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func isWhole(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// value is a node walkKnown did not walk into (a scalar, or a node of the
// wrong kind for its field): where a type error can be.
type value struct {
	path string
	node *yaml.Node
	t    reflect.Type
}

var lineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line (\d+): (.*)`) })

// SyntaxError makes a YAML parser error a file error with the line it names.
func SyntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := lineRE().FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: n, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: file, Msg: "invalid YAML: " + msg}
}

// walkKnown records field lines, reports keys that t does not have and
// collects the values it does not walk into.
func walkKnown(file string, n *yaml.Node, t reflect.Type, path string, lines Lines, errs *Errors, values *[]value) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if want, ok := containerKind(t.Kind()); !ok || n.Kind != want {
		if t.Kind() != reflect.Interface { // anything fits an interface
			*values = append(*values, value{path, n, t})
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			lines[p] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, &Error{File: file, Line: k.Line, Field: p,
					Msg: fmt.Sprintf("unknown key %q%s", k.Value, suggest(k.Value, fields))})
				continue
			}
			walkKnown(file, val, ft, p, lines, errs, values)
		}
	case reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			lines[p] = k.Line
			walkKnown(file, val, t.Elem(), p, lines, errs, values)
		}
	case reflect.Slice:
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = item.Line
			walkKnown(file, item, t.Elem(), p, lines, errs, values)
		}
	}
}

// containerKind is the node kind walkKnown walks into for a Go kind.
func containerKind(k reflect.Kind) (yaml.Kind, bool) {
	switch k {
	case reflect.Struct, reflect.Map:
		return yaml.MappingNode, true
	case reflect.Slice:
		return yaml.SequenceNode, true
	}
	return 0, false
}

var nodeType = reflect.TypeOf(yaml.Node{})

func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		ft := f.Type
		if ft == nodeType || ft.Kind() == reflect.Interface {
			ft = reflect.TypeOf((*any)(nil)).Elem()
		}
		out[tag] = ft
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest offers the closest known key for a typo.
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for f := range fields {
		if d := editDistance(key, f); d < bestD {
			best, bestD = f, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
