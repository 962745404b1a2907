package knowledge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// corpus is a small repository with known answers.
var corpus = map[string]string{
	"bus/bus.go": `package bus

// SignalBus fans signals out to every subscriber.
type SignalBus struct {
	subs []chan Signal
}

// Publish sends s to every subscriber of the bus.
func (b *SignalBus) Publish(s Signal) {
	for _, c := range b.subs {
		c <- s
	}
}
`,
	"lease/renew.go": `package lease

// renewLease extends a claim on a turn before its lease expires, with
// exponential backoff when the server does not answer.
func renewLease(claim string, backoff int) error {
	return retryWithBackoff(claim, backoff)
}
`,
	"lease/renew_test.go": `package lease

func TestRenewLease(t *testing.T) { renewLease("claim", 3) }
`,
	"config/parse.go": `package config

// parse_yaml_file reads nerve.yaml and reports the line of a bad field.
func parse_yaml_file(path string) (*Config, error) { return nil, nil }
`,
	"docs/timestamps.md": `# Timestamps

Every event carries an RFC 3339 timestamp in UTC, parsed on arrival.
`,
	"web/src/router.ts": `/** Routes HTTP requests to handlers by path prefix. */
export class RequestRouter {
  route(path: string) { return this.handlers[path]; }
}
`,
}

func TestKnowledgeQueryRanking(t *testing.T) {
	root := newRepo(t, corpus)
	mustSync(t, SyncOptions{Root: root})
	cases := []struct{ q, want string }{
		{"signal bus", "bus/bus.go"},
		{"SignalBus", "bus/bus.go"},
		{"how does the signal bus work", "bus/bus.go"},
		{"renew lease backoff", "lease/renew.go"}, // the test file ranks below the code
		{"renewLease", "lease/renew.go"},
		{"parse yaml file", "config/parse.go"},
		{"parse_yaml_file", "config/parse.go"},
		{"where are RFC 3339 timestamps parsed", "docs/timestamps.md"},
		{"route requests by path prefix", "web/src/router.ts"},
		{"request router", "web/src/router.ts"},
	}
	for _, c := range cases {
		hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: c.q, Limit: 3})
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		if len(hits) == 0 || hits[0].Path != c.want {
			t.Errorf("%q: top hits %v, want %s first", c.q, paths(hits), c.want)
			continue
		}
		h := hits[0]
		if h.Repo != root || h.StartLine < 1 || h.EndLine < h.StartLine || h.Score <= 0 || h.Text == "" {
			t.Errorf("%q: hit %+v", c.q, h)
		}
	}
	// A question about tests gets the test.
	hits, _ := Query(context.Background(), []string{root}, QueryOptions{Text: "test renew lease", Limit: 1})
	if len(hits) != 1 || hits[0].Path != "lease/renew_test.go" {
		t.Errorf("test question: %v", paths(hits))
	}
	// Limit holds.
	hits, _ = Query(context.Background(), []string{root}, QueryOptions{Text: "the bus lease timestamps router yaml", Limit: 2})
	if len(hits) != 2 {
		t.Errorf("limit 2 gave %d hits", len(hits))
	}
}

func TestKnowledgeQueryBadInputs(t *testing.T) {
	root := newRepo(t, corpus)
	// No index yet.
	_, err := Query(context.Background(), []string{root}, QueryOptions{Text: "bus"})
	var nie *NoIndexError
	if !errors.As(err, &nie) || !errors.Is(err, ErrNoIndex) || nie.ExitCode() != 1 || nie.Hint() == "" {
		t.Fatalf("no index: %v", err)
	}
	mustSync(t, SyncOptions{Root: root})
	// Nothing to search for.
	for _, q := range []string{"", "   ", "?!"} {
		_, err := Query(context.Background(), []string{root}, QueryOptions{Text: q})
		var qe *QueryError
		if !errors.As(err, &qe) || qe.ExitCode() != 2 {
			t.Errorf("query %q: %v", q, err)
		}
	}
	// No match is no error.
	if hits, err := Query(context.Background(), []string{root}, QueryOptions{Text: "zebra"}); err != nil || len(hits) != 0 {
		t.Errorf("no match: %v %v", hits, err)
	}
	// Global: a remembered repository without an index is skipped with a warning.
	gone := t.TempDir()
	var warnings []string
	hits, err := Query(context.Background(), []string{gone, root}, QueryOptions{Text: "signal bus", Warn: func(s string) { warnings = append(warnings, s) }})
	if err != nil || len(hits) == 0 || len(warnings) != 1 {
		t.Errorf("global with a missing index: %v %v %q", paths(hits), err, warnings)
	}
	if _, err := Query(context.Background(), []string{gone, t.TempDir()}, QueryOptions{Text: "bus"}); !errors.Is(err, ErrNoIndex) {
		t.Errorf("global with no index at all: %v", err)
	}
	// An index of another schema version is no index (rebuilt by sync).
	os.MkdirAll(filepath.Join(gone, IndexDir), 0o755)
	if err := os.WriteFile(IndexPath(gone), []byte{}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Query(context.Background(), []string{gone}, QueryOptions{Text: "bus"}); !errors.Is(err, ErrNoIndex) {
		t.Errorf("empty index file: %v", err)
	}
}

func TestKnowledgeFindRoot(t *testing.T) {
	root := newRepo(t, map[string]string{"a/b/c.go": "package c\n"})
	got, err := FindRoot(filepath.Join(root, "a", "b"), false)
	if err != nil || got != root {
		t.Errorf("FindRoot = %q, %v; want %q", got, err, root)
	}
	// knowledge.yaml marks a root too, nearer than .git.
	writeTree(t, root, map[string]string{"a/" + SpecFile: "include: ['**/*.go']\n"})
	if got, _ := FindRoot(filepath.Join(root, "a", "b"), false); got != filepath.Join(root, "a") {
		t.Errorf("FindRoot with knowledge.yaml = %q", got)
	}
	var re *RepoError
	if _, err := FindRoot(filepath.Join(root, "nope"), true); !errors.As(err, &re) || re.ExitCode() != 2 {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := FindRoot(filepath.Join(root, "a", "b", "c.go"), true); !errors.As(err, &re) {
		t.Errorf("a file: %v", err)
	}
	bare := t.TempDir()
	if got, err := FindRoot(bare, true); err != nil || got == "" {
		t.Errorf("explicit dir without markers: %q %v", got, err)
	}
}

func TestKnowledgeRegistry(t *testing.T) {
	reg := Registry{Home: filepath.Join(t.TempDir(), "home")}
	if repos, err := reg.List(); err != nil || len(repos) != 0 {
		t.Fatalf("empty registry: %v %v", repos, err)
	}
	done := make(chan error)
	for _, p := range []string{"/r/b", "/r/a", "/r/c", "/r/a"} {
		go func() { done <- reg.Remember(p, timeNow()) }()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	repos, err := reg.List()
	if err != nil || len(repos) != 3 || repos[0].Path != "/r/a" || repos[2].Path != "/r/c" {
		t.Errorf("registry: %+v %v", repos, err)
	}
	st, _ := os.Stat(filepath.Join(reg.Home, RegistryFile))
	if st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("registry file mode: %v", st)
	}
}
