package knowledge

import (
	"path"
	"sort"
	"strings"
)

// Priors applied to lexical scores after BM25: questions are far more often
// about the code than about its tests, and an answer spread over several
// files beats five chunks of one.
const (
	testPrior   = 0.75 // a test file, fixture or example, unless the question mentions tests
	repeatPrior = 0.9  // each further chunk of a file already ranked above
)

// isTestPath reports whether a path is a test, a fixture or an example.
func isTestPath(p string) bool {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, "_test.go"),
		strings.Contains(base, ".test."), strings.Contains(base, ".spec."),
		strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py"),
		strings.HasSuffix(base, "_test.py"):
		return true
	}
	for _, dir := range strings.Split(path.Dir(p), "/") {
		switch dir {
		case "testdata", "test", "tests", "__tests__", "fixtures", "examples":
			return true
		}
	}
	return false
}

// mentionsTests reports whether the question is itself about tests.
func mentionsTests(terms []string) bool {
	for _, t := range terms {
		switch t {
		case "test", "tests", "testing", "fixture", "example", "spec", "benchmark":
			return true
		}
	}
	return false
}

// rerank applies the priors to hits, best first, in place.
func rerank(hits []Hit, terms []string) {
	demoteTests := !mentionsTests(terms)
	for i := range hits {
		if demoteTests && isTestPath(hits[i].Path) {
			hits[i].Score *= testPrior
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	seen := map[string]int{}
	for i := range hits {
		k := hits[i].Repo + "\x00" + hits[i].Path
		for range seen[k] {
			hits[i].Score *= repeatPrior
		}
		seen[k]++
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
}
