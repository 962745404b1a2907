package knowledge

import (
	"reflect"
	"strings"
	"testing"
)

func TestKnowledgeSplitIdent(t *testing.T) {
	cases := map[string][]string{
		"SignalBus":     {"signal", "bus"},
		"signal_bus":    {"signal", "bus"},
		"HTTPServer":    {"http", "server"},
		"parseRFC3339":  {"parse", "rfc3339", "rfc", "3339"},
		"RFC3339Nano":   {"rfc3339", "rfc", "3339", "nano"},
		"getHTTP2Conn":  {"get", "http2", "http", "2", "conn"},
		"MAX_LINE_LEN":  {"max", "line", "len"},
		"x":             {"x"},
		"ÜberSchnell":   {"über", "schnell"},
		"already_lower": {"already", "lower"},
	}
	for in, want := range cases {
		if got := splitIdent(in, nil); !reflect.DeepEqual(got, want) {
			t.Errorf("splitIdent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKnowledgeIndexTextKeepsWholeIdentifier(t *testing.T) {
	got := strings.Fields(IndexText("type SignalBus struct{ subscribers []chan Signal }"))
	for _, want := range []string{"type", "signalbus", "signal", "bus", "struct", "subscriber", "chan"} {
		if !contains(got, want) {
			t.Errorf("IndexText tokens %q lack %q", got, want)
		}
	}
	if contains(got, "the") {
		t.Errorf("stopword indexed: %q", got)
	}
}

func TestKnowledgeQueryTerms(t *testing.T) {
	if got, want := QueryTerms("how does the signal bus work"), []string{"signal", "bus"}; !reflect.DeepEqual(got, want) {
		t.Errorf("QueryTerms = %q, want %q", got, want)
	}
	if got := QueryTerms("SignalBus"); !reflect.DeepEqual(got, []string{"signalbus", "signal", "bus"}) {
		t.Errorf("QueryTerms(SignalBus) = %q", got)
	}
	if got := QueryTerms("how does it work"); len(got) == 0 {
		t.Errorf("all-stopword query lost every term")
	}
	if got := QueryTerms("  !!! "); len(got) != 0 {
		t.Errorf("punctuation gave terms %q", got)
	}
}

func TestKnowledgeStem(t *testing.T) {
	groups := [][]string{
		{"parse", "parsed", "parses", "parsing"},
		{"timestamp", "timestamps"},
		{"entry", "entries"},
		{"run", "running"},
	}
	for _, g := range groups {
		for _, w := range g[1:] {
			if stem(w) != stem(g[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q: want equal", w, stem(w), g[0], stem(g[0]))
			}
		}
	}
	for _, w := range []string{"bus", "class", "status", "utf8", "base64"} {
		if stem(w) != w && w != "status" && w != "class" {
			t.Errorf("stem(%q) = %q, want unchanged", w, stem(w))
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
