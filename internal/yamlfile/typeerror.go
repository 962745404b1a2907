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
// Errors that name the field and say what it wants, in the words of the
// file (a whole number, a list) rather than Go's types. The list gives
// lines only, and a flow mapping ({claim: 5m, idle: forever}) puts several
// fields on one line, so each value is decoded again alone to find the
// ones that fail.
func typeErrors(file string, err error, values []value) Errors {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		// Errors from custom unmarshalers (Duration) carry no line; yaml.v3
		// wraps them without position, so report what we have.
		return Errors{{File: file, Msg: err.Error()}}
	}
	var errs Errors
	for _, v := range values {
		var vte *yaml.TypeError
		if err := v.node.Decode(reflect.New(v.t).Interface()); errors.As(err, &vte) {
			for _, s := range vte.Errors {
				errs = append(errs, lineError(file, s, &v))
			}
		}
	}
	if len(errs) == 0 { // not found again: report yaml.v3's list as it is
		for _, s := range te.Errors {
			errs = append(errs, lineError(file, s, nil))
		}
	}
	return errs
}

// lineError makes one of yaml.v3's "line N: ..." messages about v (nil
// when unknown) a file error.
func lineError(file, msg string, v *value) *Error {
	fe := &Error{File: file, Msg: msg}
	var t reflect.Type
	if v != nil {
		fe.Field, t = v.path, v.t
	}
	m := lineRE().FindStringSubmatch(msg)
	if m == nil {
		return fe
	}
	fe.Line, _ = strconv.Atoi(m[1])
	fe.Msg = strings.ReplaceAll(m[2], "!!", "")
	if u := unmarshalRE().FindStringSubmatch(m[2]); u != nil {
		got := u[2]
		if v != nil && v.node.Kind == yaml.ScalarNode {
			got = v.node.Value // yaml.v3 cuts a long value short
		}
		fe.Msg = mismatch(u[1], got, t, u[3])
	}
	return fe
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
