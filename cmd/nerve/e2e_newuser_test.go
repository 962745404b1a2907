package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What a new user trips over, tried as one would, with the real binary.

// keysOf decodes one JSON object and returns its keys, sorted, and the
// object.
func keysOf(t *testing.T, line string) ([]string, map[string]any) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, line)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, obj
}

// wantKeys fails unless each line of out is an object with exactly keys.
func wantKeys(t *testing.T, what, out string, keys ...string) []map[string]any {
	t.Helper()
	slices.Sort(keys)
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got, obj := keysOf(t, line)
		if !slices.Equal(got, keys) {
			t.Fatalf("%s: keys %v, want %v\n%s", what, got, keys, line)
		}
		objs = append(objs, obj)
	}
	return objs
}

// --json shapes are stable: every key present, null when empty.
func TestE2EJSONShapes(t *testing.T) {
	e := newEnv(t)
	src, _ := os.ReadFile(repoFile(t, "examples/code-review.yaml"))
	e.write("workflows/code-review.yaml", string(src))
	mod, _ := os.ReadFile(repoFile(t, "examples/code-review.jsonata"))
	e.write("workflows/code-review.jsonata", string(mod))
	e.write("workflows/slow.yaml", "workflow: slow\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nroles:\n  w: {adapter: slow, prompt: p}\n")
	e.write("nerve.yaml", "agent: {name: n1}\nadapters:\n  slow: {type: exec, command: [sleep, \"300\"]}\n")

	r := e.must(0, "init", "--json")
	var rep struct {
		Checks []json.RawMessage `json:"checks"`
	}
	json.Unmarshal([]byte(r.stdout), &rep)
	wantKeys(t, "init --json", r.stdout, "ok", "checks")
	for _, c := range rep.Checks {
		wantKeys(t, "init --json check", string(c), "name", "kind", "ok", "detail", "hint", "needed")
	}
	r = e.must(0, "validate", "--json")
	wantKeys(t, "validate --json", r.stdout, "ok", "config", "workflows", "problems")

	var list []json.RawMessage
	json.Unmarshal([]byte(e.must(0, "workflow", "list", "--json").stdout), &list)
	for _, l := range list {
		entry := wantKeys(t, "workflow list --json entry", string(l), "ref", "name", "remote", "binding", "description", "error")[0]
		if entry["remote"] != nil || entry["error"] != nil {
			t.Fatalf("a local workflow has remote and error null: %v", entry)
		}
	}
	if len(list) != 2 {
		t.Fatalf("workflow list --json: %d entries", len(list))
	}

	run := wantKeys(t, "workflow run --json", e.must(0, "workflow", "run", "code-review", "--input", "change=x", "--json").stdout,
		"thread", "status", "result", "error", "usage", "workspace", "priority")[0]
	if run["status"] != "completed" || run["error"] != nil || run["result"] == nil {
		t.Fatalf("a completed run has \"error\": null: %v", run)
	}
	ref := run["thread"].(string)
	detached := wantKeys(t, "workflow run --detach --json", e.must(0, "workflow", "run", "code-review", "--input", "change=x", "--detach", "--json").stdout,
		"thread", "status", "result", "error", "usage", "workspace", "priority")[0]
	e.must(0, "workflow", "logs", detached["thread"].(string), "-f") // let it end

	msgKeys := []string{"step", "role", "agent", "content", "meta", "error", "at", "instruction", "adapter", "usage", "commit", "changes", "child"}
	wantKeys(t, "workflow logs --json", e.must(0, "workflow", "logs", ref, "--json").stdout, msgKeys...)
	wantKeys(t, "thread messages --json", e.must(0, "thread", "messages", ref, "--json").stdout, msgKeys...)
	threads := wantKeys(t, "workflow logs WORKFLOW --json", e.must(0, "workflow", "logs", "code-review", "--json").stdout,
		"ref", "id", "workflow", "status", "step", "input", "result", "error", "created_at", "updated_at", "ended_at", "workspace", "parent", "depth", "usage")
	if len(threads) != 2 || threads[1]["error"] != nil || threads[0]["ended_at"] == nil {
		t.Fatalf("threads: %v", threads)
	}
	slow := wantKeys(t, "workflow run --detach --json", e.must(0, "workflow", "run", "slow", "--detach", "--json").stdout,
		"thread", "status", "result", "error", "usage", "workspace", "priority")[0]
	waitFor(t, "the slow turn to start", func() bool {
		var st struct {
			ActiveTurns []any `json:"active_turns"`
		}
		json.Unmarshal([]byte(e.must(0, "daemon", "status", "--json").stdout), &st)
		return len(st.ActiveTurns) == 1
	})
	cancel := wantKeys(t, "workflow cancel --json", e.must(0, "workflow", "cancel", slow["thread"].(string), "--json").stdout,
		"thread", "status", "result", "error", "usage", "workspace", "priority")[0]
	if cancel["status"] != "cancelled" {
		t.Fatalf("workflow cancel --json: %v", cancel)
	}

	status := []string{"running", "pid", "home", "version", "started_at", "config", "capacity", "claimed_slots", "outbox", "running_threads", "active_turns", "senses", "adapters", "sandbox"}
	running := wantKeys(t, "daemon status --json", e.must(0, "daemon", "status", "--json").stdout, status...)[0]
	cfg, _ := json.Marshal(running["config"])
	wantKeys(t, "daemon status --json config", string(cfg), "file", "loaded_at", "last_reload")
	stop := wantKeys(t, "daemon stop --json", e.must(0, "daemon", "stop", "--json").stdout, "running", "pid", "home", "log", "already")[0]
	if stop["running"] != false || stop["pid"] == nil || stop["log"] != nil {
		t.Fatalf("daemon stop --json: %v", stop)
	}
	wantKeys(t, "daemon status --json, not running", e.must(1, "daemon", "status", "--json").stdout, status...)
	wantKeys(t, "daemon stop --json, not running", e.must(0, "daemon", "stop", "--json").stdout, "running", "pid", "home", "log", "already")
	wantKeys(t, "daemon start --json", e.must(0, "daemon", "start", "--json").stdout, "running", "pid", "home", "log", "already")

	wantKeys(t, "khala enroll-token --json", e.must(0, "khala", "enroll-token", "--ttl", "0", "--json").stdout, "token", "uses", "expires_at", "scopes")

	e.must(0, "remote", "add", "origin", "http://127.0.0.1:1")
	wantKeys(t, "remote list --json", strings.Trim(strings.TrimSpace(e.must(0, "remote", "list", "--json").stdout), "[]"), "name", "url", "enrolled")
}

// Running init again when this agent is enrolled with the remote says so
// and exits 0, without spending the enrollment token.
func TestE2EInitAgainIsAlreadyEnrolled(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	e := newEnv(t)
	args := []string{"init", "--name", "n1", "--remote", "origin=" + k.url, "--enroll-token", tok}
	e.must(0, args...)
	before, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml"))
	r := e.must(0, args...)
	if !strings.Contains(r.stdout, "already enrolled as n1 with origin; the enrollment token was not used") ||
		!strings.Contains(r.stdout, "in "+filepath.Join(e.home, "nerve.yaml")+" (left as it is)") {
		t.Fatalf("init again: %s", r)
	}
	if after, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml")); !bytes.Equal(before, after) {
		t.Fatalf("init again rewrote nerve.yaml:\n%s", after)
	}
	// The token had two uses: the second init spent none, so one is left.
	other := newEnv(t)
	other.must(0, "init", "--name", "n2", "--remote", "origin="+k.url, "--enroll-token", tok)
	third := newEnv(t)
	r = third.must(1, "init", "--name", "n3", "--remote", "origin="+k.url, "--enroll-token", tok)
	if !strings.Contains(r.stderr, "refused the enrollment token") {
		t.Fatalf("a used-up token: %s", r)
	}
}

// A remote that refuses is exit 1; a malformed URL is exit 2 in one line
// of nerve's own, before anything is created.
func TestE2EInitRemoteErrors(t *testing.T) {
	k := startKhala(t)
	tests := []struct {
		name   string
		remote string
		token  string
		code   int
		stderr string
	}{
		{"refused token", "origin=" + k.url, "khala_enroll_wrong", 1, "nerve: remote origin refused the enrollment token (used up, expired or wrong)\nhint: ask the server's operator for a new one: nerve khala enroll-token\n"},
		{"malformed URL", "origin=::not a url::", "", 2, "nerve: --remote: \"::not a url::\" is not an http(s) URL\nhint: give an http(s) URL, e.g. http://127.0.0.1:7700\n"},
		{"malformed URL with a token", "origin=::not a url::", "t", 2, "nerve: --remote: \"::not a url::\" is not an http(s) URL\nhint: give an http(s) URL, e.g. http://127.0.0.1:7700\n"},
		{"not http", "origin=ftp://h/x", "", 2, "nerve: --remote: \"ftp://h/x\" is not an http(s) URL\nhint: give an http(s) URL, e.g. http://127.0.0.1:7700\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			home := filepath.Join(e.home, "home") // absent: init would create it
			e.extra = append(e.extra, "NERVE_HOME="+home)
			args := []string{"init", "--remote", tt.remote}
			if tt.token != "" {
				args = append(args, "--enroll-token", tt.token)
			}
			r := e.must(tt.code, args...)
			if r.stderr != tt.stderr || r.stdout != "" {
				t.Fatalf("want stderr %q, got %s", tt.stderr, r)
			}
			if _, err := os.Stat(filepath.Join(home, "nerve.yaml")); err == nil && tt.code == 2 {
				t.Fatal("a malformed --remote must create nothing")
			}
		})
	}
}

// remote add of a name that exists is refused, as git refuses it, and
// nerve.yaml stays as it was, byte for byte.
func TestE2ERemoteAddExisting(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "# mine\nagent: {name: n1}   # keep\nremotes:\n  origin: {url: \"http://127.0.0.1:1\"}\n")
	before, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml"))
	r := e.must(2, "remote", "add", "origin", "http://127.0.0.1:2")
	want := "nerve: remote origin already exists (http://127.0.0.1:1)\nhint: pick another name; to change its URL, edit remotes.origin.url in " + filepath.Join(e.home, "nerve.yaml") + "\n"
	if r.stderr != want || r.stdout != "" {
		t.Fatalf("want %q, got %s", want, r)
	}
	if after, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml")); !bytes.Equal(before, after) {
		t.Fatalf("nerve.yaml changed:\n%s", after)
	}
	e.must(0, "remote", "add", "upstream", "http://127.0.0.1:2")
	r = e.must(0, "remote", "list")
	if !strings.Contains(r.stdout, "origin    http://127.0.0.1:1") || !strings.Contains(r.stdout, "upstream  http://127.0.0.1:2") {
		t.Fatalf("remote list: %s", r)
	}
}

// A binary built by `make build` in a clone names its version and commit.
func TestE2EVersionOfMakeBuild(t *testing.T) {
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	root := repoFile(t, "")
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git clone: %v", err)
	}
	describe, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nerve")
	build := exec.Command("make", "-C", root, "build", "BIN="+bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "nerve " + strings.TrimSpace(string(describe)) + " (commit " + strings.TrimSpace(string(head)) + ", "
	if !strings.HasPrefix(string(out), want) {
		t.Fatalf("version: %q, want it to begin %q", out, want)
	}
}
