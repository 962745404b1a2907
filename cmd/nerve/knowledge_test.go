package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nerve-agents/nerve/config"
)

// knowledgeEnv is a NERVE_HOME, a repository and the config nerve.yaml
// would give (lexical only unless endpoint is set).
type knowledgeEnv struct {
	t        *testing.T
	home     string
	repo     string
	wd       string // the working directory commands see
	endpoint *config.Endpoint
	tty      bool
}

func newKnowledgeEnv(t *testing.T) *knowledgeEnv {
	repo := t.TempDir()
	if real, err := filepath.EvalSymlinks(repo); err == nil {
		repo = real
	}
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	e := &knowledgeEnv{t: t, home: t.TempDir(), repo: repo, wd: repo}
	e.write("bus/bus.go", "package bus\n\n// SignalBus fans signals out to every subscriber.\ntype SignalBus struct {\n\tsubs []chan string\n}\n")
	e.write("lease/lease.go", "package lease\n\n// renewLease extends a claim before its lease expires.\nfunc renewLease(claim string) error {\n\treturn nil\n}\n")
	e.write("README.md", "# Demo\n\nA demo repository about leases and signals.\n")
	return e
}

func (e *knowledgeEnv) write(rel, content string) {
	p := filepath.Join(e.repo, filepath.FromSlash(rel))
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// run runs `nerve knowledge ARGS` as Main would: the same flag-error
// mapping, the same error printing, the exit code.
func (e *knowledgeEnv) run(args ...string) (stdout, stderr string, code int) {
	ios, out, errOut := TestStreams()
	ios.SetTTY(e.tty)
	f := &Factory{IO: ios, Getenv: func(k string) string {
		if k == "NERVE_HOME" {
			return e.home
		}
		return ""
	}}
	f.Config = func() (*config.Config, error) {
		return &config.Config{Home: e.home, Knowledge: e.endpoint}, nil
	}
	wd := func() (string, error) { return e.wd, nil }
	root := &cobra.Command{Use: "nerve", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("see 'nerve "+c.Name()+" --help'", "%s", err.Error())
	})
	k := &cobra.Command{Use: "knowledge"}
	k.AddCommand(
		newCmdKnowledgeSync(f, func(o *KnowledgeSyncOptions) error { o.Getwd = wd; return knowledgeSyncRun(o) }),
		newCmdKnowledgeQuery(f, func(o *KnowledgeQueryOptions) error { o.Getwd = wd; return knowledgeQueryRun(o) }),
	)
	root.AddCommand(k)
	root.SetArgs(append([]string{"knowledge"}, args...))
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	if err := root.Execute(); err != nil {
		printError(ios, err)
		code = exitCodeOf(err)
	}
	return out.String(), errOut.String(), code
}

func (e *knowledgeEnv) must(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("nerve knowledge %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func TestKnowledgeCommandTree(t *testing.T) {
	ios, _, _ := TestStreams()
	cmd := newCmdKnowledge(&Factory{IO: ios})
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	if strings.Join(names, ",") != "query,sync" {
		t.Errorf("subcommands %v", names)
	}
}

func TestKnowledgeQueryFlags(t *testing.T) {
	ios, _, _ := TestStreams()
	f := &Factory{IO: ios}
	var got *KnowledgeQueryOptions
	cmd := newCmdKnowledgeQuery(f, func(o *KnowledgeQueryOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"-g", "--limit", "3", "--json", "signal", "bus"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Text != "signal bus" || !got.Global || got.Limit != 3 || !got.JSON || got.Repo != "" {
		t.Errorf("options %+v", got)
	}
	var sgot *KnowledgeSyncOptions
	scmd := newCmdKnowledgeSync(f, func(o *KnowledgeSyncOptions) error { sgot = o; return nil })
	scmd.SetArgs([]string{"--repo", "/x", "--json"})
	if err := scmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if sgot.Repo != "/x" || !sgot.JSON {
		t.Errorf("sync options %+v", sgot)
	}
}

func TestKnowledgeSyncThenQuery(t *testing.T) {
	e := newKnowledgeEnv(t)
	e.wd = filepath.Join(e.repo, "bus") // a subdirectory: the repo is found above
	out := e.must("sync")
	if !strings.HasPrefix(out, "synced "+e.repo+": 3 added, 0 updated, 0 removed, 0 unchanged (3 chunks, ") {
		t.Errorf("sync summary %q", out)
	}
	out = e.must("sync", "--json")
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum["unchanged"] != 3.0 || sum["added"] != 0.0 {
		t.Errorf("sync --json %q: %v", out, err)
	}

	out = e.must("query", "--json", "signal bus")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var hit map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &hit); err != nil {
		t.Fatalf("query --json %q: %v", out, err)
	}
	for _, k := range []string{"repo", "path", "start_line", "end_line", "score", "text"} {
		if _, ok := hit[k]; !ok {
			t.Errorf("hit lacks %q: %v", k, hit)
		}
	}
	if len(hit) != 6 || hit["path"] != "bus/bus.go" || hit["repo"] != e.repo || hit["start_line"] != 1.0 {
		t.Errorf("hit %v", hit)
	}

	out = e.must("query", "SignalBus", "--limit", "1")
	want := "bus/bus.go:1-6  score "
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "\n    // SignalBus fans signals out") {
		t.Errorf("query output %q", out)
	}

	// From elsewhere, -g finds the repository through NERVE_HOME.
	e.wd = t.TempDir()
	out = e.must("query", "-g", "renewLease", "--limit", "1")
	if !strings.HasPrefix(out, filepath.Join(e.repo, "lease", "lease.go")+":") {
		t.Errorf("query -g %q", out)
	}
	out = e.must("query", "--repo", e.repo, "lease claim", "--limit", "1")
	if !strings.HasPrefix(out, "lease/lease.go:") {
		t.Errorf("query --repo %q", out)
	}
	_, errOut, code := e.run("query", "--repo", e.repo, "zebra")
	if code != 0 || errOut != "no matches for \"zebra\"\n" {
		t.Errorf("no match: exit %d %q", code, errOut)
	}
}

func TestKnowledgeQueryTrimsOnTTY(t *testing.T) {
	e := newKnowledgeEnv(t)
	var b strings.Builder
	b.WriteString("package long\n\n// LongFunction is long.\nfunc LongFunction() {\n")
	for i := range 30 {
		fmt.Fprintf(&b, "\tx%d := %q\n", i, strings.Repeat("y", 200))
	}
	b.WriteString("}\n")
	e.write("long/long.go", b.String())
	e.must("sync")
	e.tty = true
	out := e.must("query", "LongFunction", "--limit", "1")
	if !strings.Contains(out, "… 27 more lines") || strings.Count(out, "\n") != 10 {
		t.Errorf("TTY output not trimmed:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > ttyHitCols+4 {
			t.Errorf("line of %d columns on a TTY", len([]rune(l)))
		}
	}
	e.tty = false
	if out := e.must("query", "LongFunction", "--limit", "1"); strings.Contains(out, "more lines") {
		t.Errorf("non-TTY output trimmed")
	}
	e.tty = true
	if out := e.must("query", "--json", "LongFunction", "--limit", "1"); !strings.Contains(out, strings.Repeat("y", 200)) {
		t.Errorf("--json trimmed on a TTY")
	}
}

func TestKnowledgeBadInputs(t *testing.T) {
	e := newKnowledgeEnv(t)
	cases := []struct {
		args   []string
		code   int
		stderr []string
	}{
		{[]string{"query", "bus"}, 1, []string{"nerve: " + e.repo + " has no knowledge index yet\n", "hint: run `nerve knowledge sync --repo " + e.repo + "`\n"}},
		{[]string{"query", "-g", "bus"}, 1, []string{"nerve: no repository has a knowledge index yet\n", "hint: run `nerve knowledge sync` in a repository first\n"}},
		{[]string{"query", "--repo", e.repo, "-g", "bus"}, 2, []string{"nerve: --repo and -g cannot be used together\n", "hint: use --repo P for one repository or -g for all, not both\n"}},
		{[]string{"query", "--repo", "/no/such/repo", "bus"}, 2, []string{"nerve: repository /no/such/repo: no such directory\n"}},
		{[]string{"sync", "--repo", "/no/such/repo"}, 2, []string{"nerve: repository /no/such/repo: no such directory\n"}},
		{[]string{"query"}, 2, []string{"nerve: knowledge query needs TEXT\n"}},
		{[]string{"query", " "}, 2, []string{"nerve: the query is empty\n"}},
		{[]string{"query", "--limit", "0", "bus"}, 2, []string{"nerve: --limit must be at least 1, not 0\n"}},
		{[]string{"query", "--frobnicate", "bus"}, 2, []string{"nerve: unknown flag: --frobnicate\n"}},
		{[]string{"sync", "extra"}, 2, []string{"nerve: knowledge sync takes no arguments, got \"extra\"\n", "hint: pass the repository with --repo PATH\n"}},
	}
	for _, c := range cases {
		out, errOut, code := e.run(c.args...)
		if code != c.code || out != "" {
			t.Errorf("%v: exit %d, stdout %q, want exit %d", c.args, code, out, c.code)
		}
		if c.stderr != nil && errOut != strings.Join(c.stderr, "") && !(len(c.stderr) == 1 && strings.HasPrefix(errOut, c.stderr[0])) {
			t.Errorf("%v: stderr %q, want %q", c.args, errOut, strings.Join(c.stderr, ""))
		}
	}

	// Outside any repository, with no --repo.
	e.wd = t.TempDir()
	_, errOut, code := e.run("query", "bus")
	if code != 2 || !strings.Contains(errOut, "not inside a repository") || !strings.Contains(errOut, "hint: ") {
		t.Errorf("outside a repo: exit %d %q", code, errOut)
	}
	e.wd = e.repo

	// A bad knowledge.yaml: file, line, field; exit 2.
	e.write("knowledge.yaml", "include:\n  - \"src/**\"\n  - \"[\"\nexclude: []\n")
	_, errOut, code = e.run("sync")
	want := "nerve: " + filepath.Join(e.repo, "knowledge.yaml") + ":3: include[1]: bad glob \"[\"\n"
	if code != 2 || !strings.HasPrefix(errOut, want) {
		t.Errorf("bad knowledge.yaml: exit %d %q, want %q", code, errOut, want)
	}
	e.write("knowledge.yaml", "inclde: [\"*.go\"]\n")
	_, errOut, code = e.run("sync")
	if code != 2 || !strings.Contains(errOut, "knowledge.yaml:1: inclde: unknown field") {
		t.Errorf("unknown field: exit %d %q", code, errOut)
	}
}

func TestKnowledgeEndpointDown(t *testing.T) {
	e := newKnowledgeEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/v1"
	l.Close()
	e.endpoint = &config.Endpoint{BaseURL: url, Model: "nomic-embed-text"}
	out, errOut, code := e.run("sync")
	if code != 1 || !strings.HasPrefix(out, "synced ") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 || lines[0] != "nerve: embeddings "+url+"/embeddings (model nomic-embed-text): connection refused: is the server running?" || !strings.HasPrefix(lines[1], "hint: the lexical index was updated") {
		t.Errorf("stderr %q", errOut)
	}
	// The lexical index answers, with one warning.
	out, errOut, code = e.run("query", "signal bus", "--limit", "1")
	if code != 0 || !strings.HasPrefix(out, "bus/bus.go:") || strings.Count(errOut, "warning: ") != 1 {
		t.Errorf("query with the endpoint down: exit %d %q %q", code, out, errOut)
	}
}

func TestKnowledgeConfigError(t *testing.T) {
	boom := errors.New("nerve.yaml:3: knowledge.base_url: not a URL")
	_, err := knowledgeEmbedder(func() (*config.Config, error) { return nil, boom }, nil)
	if !errors.Is(err, boom) {
		t.Errorf("config error lost: %v", err)
	}
	e, err := knowledgeEmbedder(func() (*config.Config, error) {
		return &config.Config{Knowledge: &config.Endpoint{BaseURL: "http://x/v1", Model: "m", APIKeyEnv: "K"}}, nil
	}, func(k string) string { return map[string]string{"K": "secret"}[k] })
	if err != nil || e == nil || e.APIKey != "secret" || e.Model != "m" {
		t.Errorf("embedder %+v %v", e, err)
	}
}
