package knowledge

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// maxTokenLen drops longer words: base64, hex digests and minified code
// are not something anyone asks for by name.
const maxTokenLen = 64

// stopwords are left out of the index and of queries: English glue that
// every chunk has and no question is about.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "is": true, "are": true, "was": true, "were": true,
	"be": true, "been": true, "being": true, "do": true, "does": true, "did": true,
	"of": true, "in": true, "on": true, "at": true, "to": true, "for": true, "from": true,
	"by": true, "with": true, "and": true, "or": true, "this": true, "that": true,
	"these": true, "those": true, "it": true, "its": true, "as": true, "into": true,
	"we": true, "you": true, "there": true, "here": true, "than": true, "then": true,
	"so": true, "such": true, "which": true, "what": true, "where": true, "when": true,
	"who": true, "whom": true, "why": true, "how": true, "can": true, "could": true,
	"would": true, "should": true, "will": true, "shall": true, "may": true, "might": true,
	"must": true, "has": true, "have": true, "had": true, "not": true, "no": true,
	"if": true, "else": true, "but": true, "also": true, "any": true, "all": true,
	"some": true, "each": true, "other": true, "our": true, "your": true, "their": true,
	"they": true, "them": true, "he": true, "she": true, "his": true, "her": true,
	"me": true, "my": true, "us": true, "am": true, "about": true, "via": true,
}

// queryStopwords are left out of questions only: words a question uses to
// ask ("how does X work") that code uses for other things.
var queryStopwords = map[string]bool{
	"work": true, "works": true, "working": true, "happen": true, "happens": true,
	"find": true, "code": true, "implemented": true, "implementation": true,
	"done": true, "used": true, "use": true, "uses": true, "get": true, "gets": true,
}

// queryStops is queryStopwords as the tokens come out: stemmed (at first
// use: package initialisation runs in every nerve process).
var queryStops = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for w := range queryStopwords {
		m[stem(w)] = true
	}
	return m
})

// IndexText turns text into the token stream the full-text index stores:
// each identifier lowercased whole, then, when it has several, its parts
// split at snake_case and camelCase boundaries and between letters and
// digits. "SignalBus" gives "signalbus signal bus"; "parseRFC3339" gives
// "parserfc3339 parse rfc3339 rfc 3339".
func IndexText(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	forEachToken(text, func(t string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t)
	})
	return b.String()
}

// QueryTerms returns the distinct (stemmed) tokens of a question, in order, with
// question words left out. When nothing but stopwords is left they are
// kept, so "how" still finds something.
func QueryTerms(q string) []string {
	var out, all []string
	seen := map[string]bool{}
	forEachToken(q, func(t string) {
		if seen[t] {
			return
		}
		seen[t] = true
		all = append(all, t)
		if !queryStops()[t] {
			out = append(out, t)
		}
	})
	if len(out) == 0 {
		forEachRawWord(q, func(w string) {
			w = stem(strings.ToLower(w))
			if !seen[w] && len(w) <= maxTokenLen {
				seen[w] = true
				all = append(all, w)
			}
		})
		return all
	}
	return out
}

// forEachToken calls emit with each index token of text. Stopwords are
// dropped; a word's parts are emitted only when it has more than one.
func forEachToken(text string, emit func(string)) {
	var parts []string
	forEachRawWord(text, func(w string) {
		if len(w) > maxTokenLen {
			return
		}
		whole := lower(w)
		if !keep(whole) {
			return
		}
		emit(stem(whole))
		parts = splitIdent(w, parts[:0])
		if len(parts) <= 1 {
			return
		}
		for _, p := range parts {
			if p != whole && keep(p) {
				emit(stem(p))
			}
		}
	})
}

func keep(t string) bool { return len(t) >= 2 && !stopwords[t] }

// forEachRawWord calls emit with each run of letters, digits and '_'.
func forEachRawWord(text string, emit func(string)) {
	start := -1
	for i := 0; i < len(text); {
		c := text[i]
		var word bool
		size := 1
		if c < utf8.RuneSelf {
			word = c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(text[i:])
			word = unicode.IsLetter(r) || unicode.IsDigit(r)
		}
		if word {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			emitWord(text[start:i], emit)
			start = -1
		}
		i += size
	}
	if start >= 0 {
		emitWord(text[start:], emit)
	}
}

func emitWord(w string, emit func(string)) {
	w = strings.Trim(w, "_")
	if w != "" {
		emit(w)
	}
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

type charClass int

const (
	clOther charClass = iota
	clLower
	clUpper
	clDigit
)

func classOf(r rune) charClass {
	switch {
	case r >= 'a' && r <= 'z':
		return clLower
	case r >= 'A' && r <= 'Z':
		return clUpper
	case r >= '0' && r <= '9':
		return clDigit
	case unicode.IsUpper(r):
		return clUpper
	case unicode.IsLower(r):
		return clLower
	case unicode.IsDigit(r):
		return clDigit
	}
	return clOther
}

// splitIdent appends the lowercased parts of an identifier to dst: split at
// '_', before an upper-case letter that follows a lower-case one or a
// digit, before the last capital of an acronym that starts a word
// (HTTPServer: http, server), and between letters and digits (rfc3339:
// rfc, 3339; kept together as well as a case part).
func splitIdent(w string, dst []string) []string {
	for _, seg := range strings.Split(w, "_") {
		if seg == "" {
			continue
		}
		rs := []rune(seg)
		start := 0
		for i := 1; i <= len(rs); i++ {
			if i < len(rs) && !caseBoundary(rs, i) {
				continue
			}
			part := strings.ToLower(string(rs[start:i]))
			dst = append(dst, part)
			dst = appendAlnumSplit(dst, part)
			start = i
		}
	}
	return dst
}

func caseBoundary(rs []rune, i int) bool {
	prev, cur := classOf(rs[i-1]), classOf(rs[i])
	if cur != clUpper {
		return false
	}
	if prev == clLower || prev == clDigit {
		return true
	}
	return prev == clUpper && i+1 < len(rs) && classOf(rs[i+1]) == clLower
}

// appendAlnumSplit appends the letter and digit runs of a part that mixes
// both, so "RFC 3339" finds rfc3339.
func appendAlnumSplit(dst []string, part string) []string {
	hasDigit, hasAlpha := false, false
	for _, r := range part {
		if classOf(r) == clDigit {
			hasDigit = true
		} else {
			hasAlpha = true
		}
	}
	if !hasDigit || !hasAlpha {
		return dst
	}
	start, prevDigit := 0, false
	for i, r := range part {
		d := classOf(r) == clDigit
		if i > 0 && d != prevDigit {
			dst = append(dst, part[start:i])
			start = i
		}
		prevDigit = d
	}
	return append(dst, part[start:])
}
