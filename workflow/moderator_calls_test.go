package workflow

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func unknownCalls(t *testing.T, src string) string {
	t.Helper()
	m, err := CompileModerator(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	var out []string
	for _, c := range m.UnknownCalls() {
		out = append(out, "$"+c.Name+" at "+c.Where())
	}
	return strings.Join(out, ", ")
}

// jsonataFunctions are the functions of JSONata's standard library.
var jsonataFunctions = []string{"string", "length", "substring", "substringBefore", "substringAfter", "uppercase",
	"lowercase", "trim", "pad", "contains", "split", "join", "match", "replace", "eval", "base64encode", "base64decode",
	"encodeUrlComponent", "encodeUrl", "decodeUrlComponent", "decodeUrl", "formatNumber", "formatBase", "formatInteger",
	"parseInteger", "number", "abs", "floor", "ceil", "round", "power", "sqrt", "random", "sum", "max", "min", "average",
	"boolean", "not", "exists", "count", "append", "sort", "reverse", "shuffle", "distinct", "zip", "keys", "lookup",
	"spread", "merge", "sift", "each", "error", "assert", "type", "now", "millis", "fromMillis", "toMillis", "map",
	"filter", "single", "reduce"}

func TestUnknownCalls(t *testing.T) {
	var all []string
	for _, f := range jsonataFunctions {
		all = append(all, "$"+f+"(x)")
	}
	cases := []struct{ src, want string }{
		{`{"done": $nosuchfn(x)}`, "$nosuchfn at 1:10"},
		{"(\n  $n := 1;\n  $nosuch($n)\n)", "$nosuch at 3:3"},
		{`x ~> $nosuchfn`, "$nosuchfn at 1:6"},
		{`x ~> $nosuchfn(1)`, "$nosuchfn at 1:6"},
		{`"é→" & $nope ()`, "$nope at 1:8"},
		{`$a() & $b() & $a()`, "$a at 1:1, $b at 1:8, $a at 1:15"},
		{"[" + strings.Join(all, ", ") + "]", ""},
		{`$sum([1, 2]) + $count(messages) ~> $string`, ""},
		{`($f := function($x) {$x + 1}; $f(2))`, ""},
		{`$map(messages, function($m, $i, $fn) {$fn($m)})`, ""},
		{`$map(messages, λ($m) {$m.step})`, ""},
		{`($g := $uppercase; $g("a"))`, ""},
		{`messages@$m.($m())`, ""},
		{`"$nope(1)" & '$nope(2)' & /* $nope(3) */ "x"`, ""},
		{`$match(content, /\$nope\(x\)/i) ? $done(1) : 2`, "$done at 1:35"},
		{"`$nope`(1)", ""},
		{`step / 2 / $half(step)`, "$half at 1:12"},
		{`$$.last = null and $.step > 1e-3`, ""},
	}
	for _, tc := range cases {
		if got := unknownCalls(t, tc.src); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.src, got, tc.want)
		}
	}
}

// No example moderator calls a function that does not exist.
func TestUnknownCallsExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		d, err := LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if c := d.Moderator.UnknownCalls(); len(c) > 0 {
			t.Errorf("%s: %+v", f, c)
		}
	}
}

// A moderator that calls an undefined function fails naming it and where
// it is: the one the evaluation reached, not the first in the source.
func TestRouteNamesTheUndefinedFunction(t *testing.T) {
	cases := []struct{ mod, want string }{
		{`{"done": $nosuchfn(input.x)}`, "$nosuchfn at 1:10"},
		{"input.x = 2\n  ? $first()\n  : $second()", "$second at 3:5"},
		{`(($g := function() {1}); $g())`, "$g at 1:26"},
		{`$map([1], function($v) {$nope($v)})`, "$nope at 1:25"},
	}
	for _, tc := range cases {
		d := defWith(t, `{"done": true}`, 0)
		d.Moderator, _ = CompileModerator(tc.mod) // as written: YAML's quotes would fold its lines
		_, err := Route(context.Background(), d, state(0))
		want := "workflow m: moderator failed: T1006: attempted to invoke undefined function " + tc.want
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.mod, err, want)
		}
	}
	// A value that is not a function is no missing function.
	_, err := Route(context.Background(), defWith(t, `($x := 1; $x())`, 0), state(0))
	if err == nil || !strings.HasSuffix(err.Error(), "T1006: not a function: float64") {
		t.Errorf("got %v", err)
	}
}
