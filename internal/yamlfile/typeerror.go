package yamlfile

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// yaml.v3's "cannot unmarshal !!TAG `VALUE` into GOTYPE" (no VALUE for a
// list or mapping); VALUE is cut to 7 characters when longer than 10.
var unmarshalRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
})

// typeErrors turns yaml.v3's "line N: cannot unmarshal ..." list into
// Errors that name the field and say what was expected, in the words of
// the file (a whole number, a list) rather than Go's types.
func typeErrors(file string, err error, doc *yaml.Node, root reflect.Type, lines Lines) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		// Errors from custom unmarshalers (Duration) carry no line; yaml.v3
		// wraps them without position, so report what we have.
		return &Error{File: file, Msg: err.Error()}
	}
	byLine := map[int]string{}
	for p, n := range lines {
		if cur, ok := byLine[n]; !ok || len(p) > len(cur) {
			byLine[n] = p
		}
	}
	var types map[string]reflect.Type
	var errs Errors
	for _, s := range te.Errors {
		fe := &Error{File: file, Msg: s}
		if m := lineRE().FindStringSubmatch(s); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Msg = strings.ReplaceAll(m[2], "!!", "")
			fe.Field = byLine[fe.Line]
			if u := unmarshalRE().FindStringSubmatch(m[2]); u != nil {
				if types == nil {
					types = typesOf(root, map[string]reflect.Type{})
				}
				value := fullValue(doc, fe.Line, u[2])
				fe.Msg = mismatch(u[1], value, types[u[3]], u[3])
			}
		}
		errs = append(errs, fe)
	}
	return errs
}

// mismatch says what a field wants and what it got: "want a whole number,
// got 99999999999999999999 (out of range)".
func mismatch(tag, value string, t reflect.Type, goType string) string {
	want := "a value of type " + goType
	if t != nil {
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "a whole number"
			if _, ok := new(big.Int).SetString(value, 0); ok && (tag == "int" || tag == "float") {
				value += " (out of range)"
			}
		case reflect.Float32, reflect.Float64:
			want = "a number"
		case reflect.Bool:
			want = "true or false"
		case reflect.String:
			want = "a string"
		case reflect.Slice, reflect.Array:
			want = "a list"
		case reflect.Map, reflect.Struct:
			want = "a mapping"
		}
	}
	switch tag {
	case "seq":
		value = "a list"
	case "map":
		value = "a mapping"
	case "str":
		value = strconv.Quote(value)
	}
	return fmt.Sprintf("want %s, got %s", want, value)
}

// fullValue is the value yaml.v3 cut short in its message: the scalar on
// line that starts with what the message kept.
func fullValue(n *yaml.Node, line int, shown string) string {
	prefix, cut := strings.CutSuffix(shown, "...")
	if !cut {
		return shown
	}
	var found string
	var walk func(n *yaml.Node, isKey bool) bool
	walk = func(n *yaml.Node, isKey bool) bool {
		if n.Kind == yaml.ScalarNode && !isKey && n.Line == line && strings.HasPrefix(n.Value, prefix) {
			found = n.Value
			return true
		}
		for i, c := range n.Content {
			if walk(c, n.Kind == yaml.MappingNode && i%2 == 0) {
				return true
			}
		}
		return false
	}
	if walk(n, false) {
		return found
	}
	return shown
}

// typesOf indexes t and every type its fields, elements and keys have by
// the name yaml.v3 gives them in its messages (reflect's String).
func typesOf(t reflect.Type, seen map[string]reflect.Type) map[string]reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, ok := seen[t.String()]; ok {
		return seen
	}
	seen[t.String()] = t
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				typesOf(t.Field(i).Type, seen)
			}
		}
	case reflect.Map:
		typesOf(t.Key(), seen)
		typesOf(t.Elem(), seen)
	case reflect.Slice, reflect.Array:
		typesOf(t.Elem(), seen)
	}
	return seen
}
