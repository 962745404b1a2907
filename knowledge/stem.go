package knowledge

import "strings"

// stem strips common English inflections so "parsed", "parses", "parsing"
// and "parse" meet. It is deliberately light (plural, -ed, -ing, -ly, a
// final e): it runs on every token at index and at query time alike, and
// tokens with digits or of four letters or fewer pass unchanged. The index
// stores stemmed tokens itself (rather than using FTS5's porter), so a
// query can read each term's document frequency straight from the index.
func stem(w string) string {
	if len(w) <= 4 || hasDigit(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 5:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "es") && endsWithAny(w[:len(w)-2], "sh", "ch", "x", "z"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && len(w) >= 7:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) >= 6 && !strings.HasSuffix(w, "eed"):
		w = undouble(w[:len(w)-2])
	case strings.HasSuffix(w, "ly") && len(w) >= 6:
		w = w[:len(w)-2]
	}
	if strings.HasSuffix(w, "e") && len(w) >= 5 {
		w = w[:len(w)-1]
	}
	return w
}

// undouble turns "runn" (from running) into "run", but keeps ll, ss, zz.
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

func endsWithAny(w string, sufs ...string) bool {
	for _, s := range sufs {
		if strings.HasSuffix(w, s) {
			return true
		}
	}
	return false
}

func hasDigit(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] >= '0' && w[i] <= '9' {
			return true
		}
	}
	return false
}
