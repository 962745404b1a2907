package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeRunSections are the README's sections whose commands a new user
// types first; TestE2EReadmeCommands runs every one, in this order.
var readmeRunSections = []string{"Quick start", "Using it", "Setting up an agent", "A shared queue: Khala and remotes"}

// TestE2EReadmeCommands runs the shell blocks of the README's first
// sections as written, in order, on fresh machines: a clone (examples/,
// bin/nerve) with a HOME that has no ~/.nerve, as a new user has. So the
// README cannot drift from what nerve does. The rules:
//   - bin/nerve and nerve are the nerve these tests built (bin/nerve in
//     the clone, nerve on PATH);
//   - `nerve khala ...` runs on the queue host, a HOME of its own; every
//     other command on the agent machine;
//   - placeholders go through readmeSubstitutions; a command that still
//     holds one (an upper-case word, a host that is not 127.0.0.1, an
//     @file the clone has not) fails the test, it is never skipped;
//   - every command exits 0, unless readmeExits says otherwise;
//   - a "# prints REF" comment is checked against what it printed;
//   - a yaml block is added to the agent's nerve.yaml;
//   - `make demo` runs the Makefile's recipe with this nerve (not a build
//     into the checkout) and prints the README's demo block, pids,
//     paths and durations aside; `make test` is this test's own run, so
//     only its recipe is checked (make -n).
func TestE2EReadmeCommands(t *testing.T) {
	sections := readmeSections(t)
	r := newReadmeRun(t)
	for _, b := range sections["Quick start"] {
		if b.lang == "" && r.demoWant == "" {
			r.demoWant = strings.Join(b.lines, "\n")
		}
	}
	for _, name := range readmeRunSections {
		blocks, ok := sections[name]
		if !ok {
			t.Fatalf("README.md has no section %q: update readmeRunSections", name)
		}
		var cmds []string
		for _, b := range blocks {
			switch b.lang {
			case "sh":
				for _, c := range shellCommands(b) {
					r.run(c)
					cmds = append(cmds, c.cmd)
				}
			case "yaml":
				r.addConfig(b)
			}
		}
		if len(cmds) == 0 {
			t.Fatalf("README section %q has no shell commands: update readmeRunSections", name)
		}
		if name == "A shared queue: Khala and remotes" && !slices.Contains(cmds, "nerve daemon start") {
			t.Errorf("the Khala section does not say that the agent machine runs `nerve daemon start`")
		}
	}
}

// readmeSubstitutions map the README's placeholders onto this test's
// machines, all on 127.0.0.1.
func (r *readmeRun) readmeSubstitutions() []struct{ from, to string } {
	return []struct{ from, to string }{
		{"0.0.0.0:7700", r.khalaAddr},                       // the server listens on loopback, a free port
		{"http://queue-host:7700", "http://" + r.khalaAddr}, // the queue host is this machine
		{"TOKEN", r.token},                                  // what `nerve khala enroll-token` printed
		{"git@github.com:me/app.git", r.gitRemote},          // a bare repository with a commit on main
		{"adapter: claude", "adapter: example"},             // no agent CLI here: the built-in example agent
	}
}

// readmeExits are the commands that may exit other than 0, and what they
// must say then.
var readmeExits = map[string]struct {
	codes []int
	says  string
}{
	// The example agent has ended the thread before the cancel comes: it
	// says so and exits 0, as docker does for a container that has stopped.
	"bin/nerve workflow cancel code-review#thread-2": {[]int{0}, "already ended (completed)"},
}

type readmeRun struct {
	t            *testing.T
	repo, clone  string // the checkout (make runs there), a new user's clone
	agent, queue string // the two machines' HOMEs
	khalaAddr    string
	token        string
	gitRemote    string
	demoWant     string
}

func newReadmeRun(t *testing.T) *readmeRun {
	root, err := os.MkdirTemp("", "readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	r := &readmeRun{t: t, repo: repoFile(t, "."), clone: filepath.Join(root, "clone"),
		agent: filepath.Join(root, "agent"), queue: filepath.Join(root, "queue"), khalaAddr: freeAddr(t)}
	for _, d := range []string{filepath.Join(r.clone, "bin"), r.agent, r.queue} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(r.repo, "examples"), r.clone).CombinedOutput(); err != nil {
		t.Fatalf("copy examples: %v\n%s", err, out)
	}
	if err := os.Symlink(nerveBin(t), filepath.Join(r.clone, "bin", "nerve")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(r.clone, "my.diff"), []byte("--- a/upload.go\n+++ b/upload.go\n+// retry failed uploads with exponential backoff\n"), 0o644)
	seed := gitRepo(t)
	r.gitRemote = filepath.Join(root, "app.git")
	git(t, seed, "clone", "--quiet", "--bare", seed, r.gitRemote)
	// Stops run before the directories go (cleanups run last first).
	t.Cleanup(func() { r.stopDaemon(r.agent, filepath.Join(r.agent, ".nerve")) })
	return r
}

// env is a machine's environment: its HOME, no NERVE_HOME or XDG
// directories (their defaults are under HOME), nerve on PATH, and no make
// of `make test` around a make the test runs.
func (r *readmeRun) env(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "PATH" || strings.HasPrefix(k, "NERVE_") || strings.HasPrefix(k, "XDG_") ||
			k == "MAKEFLAGS" || k == "MAKELEVEL" || k == "MFLAGS" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "PATH="+filepath.Join(r.clone, "bin")+":"+os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1")
}

// substitute applies readmeSubstitutions and fails when a placeholder is
// left, or is used before the test knows its value.
func (r *readmeRun) substitute(s string) string {
	r.t.Helper()
	for _, sub := range r.readmeSubstitutions() {
		if strings.Contains(s, sub.from) {
			if sub.to == "" {
				r.t.Fatalf("README: %q uses %s before the command that gives it", s, sub.from)
			}
			s = strings.ReplaceAll(s, sub.from, sub.to)
		}
	}
	return s
}

var (
	placeholderWord = regexp.MustCompile(`\b[A-Z][A-Z0-9_]{2,}\b`)
	urlHost         = regexp.MustCompile(`://([\w.-]+)|[\w.-]+@([\w.-]+):|\b([\w.-]+):\d{2,5}\b`)
	fileRef         = regexp.MustCompile(`=@(\S+)`)
)

// checkMapped fails the test when a README command (orig, cmd after
// substitution) still holds something this machine cannot run as is.
func (r *readmeRun) checkMapped(line, orig, cmd string) {
	r.t.Helper()
	for _, sub := range r.readmeSubstitutions() {
		orig = strings.ReplaceAll(orig, sub.from, "")
	}
	if w := placeholderWord.FindString(orig); w != "" {
		r.t.Fatalf("README command %q has a placeholder %q the test has no mapping for (readmeSubstitutions)", line, w)
	}
	for _, m := range urlHost.FindAllStringSubmatch(cmd, -1) {
		if host := m[1] + m[2] + m[3]; host != "127.0.0.1" && host != "localhost" {
			r.t.Fatalf("README command %q reaches host %q: map it to 127.0.0.1 (readmeSubstitutions)", line, host)
		}
	}
	for _, m := range fileRef.FindAllStringSubmatch(cmd, -1) {
		if _, err := os.Stat(filepath.Join(r.clone, m[1])); err != nil {
			r.t.Fatalf("README command %q reads %s, which the test's clone has not: add it in newReadmeRun", line, m[1])
		}
	}
}

// run runs one README command on its machine and checks how it ended.
func (r *readmeRun) run(c readmeCmd) {
	t := r.t
	t.Helper()
	t.Logf("$ %s", c.cmd)
	switch {
	case c.cmd == "make demo":
		r.makeDemo()
		return
	case c.cmd == "make test":
		r.makeTest(c)
		return
	}
	cmd := r.substitute(c.cmd)
	r.checkMapped(c.line, c.cmd, cmd)
	home := r.agent
	if strings.HasPrefix(c.cmd, "nerve khala ") {
		home = r.queue
	}
	if strings.HasPrefix(c.cmd, "nerve khala serve") {
		r.startKhala(cmd)
		return
	}
	res := r.sh(home, cmd)
	if strings.Contains(res.stderr, "goroutine ") || strings.Contains(res.stderr, "panic:") {
		t.Fatalf("README: %s\nprinted a stack trace:\n%s", c.line, res.stderr)
	}
	if want, ok := readmeExits[c.cmd]; ok {
		if !slices.Contains(want.codes, res.code) || !strings.Contains(res.stdout+res.stderr, want.says) {
			t.Fatalf("README: %s\nwant exit %v saying %q, got %s", c.line, want.codes, want.says, res)
		}
	} else if res.code != 0 {
		t.Fatalf("README: %s\nran as %q on %s: %s", c.line, cmd, filepath.Base(home), res)
	}
	if m := regexp.MustCompile(`^prints (\S+#thread-\d+)`).FindStringSubmatch(c.comment); m != nil && strings.TrimSpace(res.stdout) != m[1] {
		t.Fatalf("README: %s\nsays it prints %s; it printed %q", c.line, m[1], res.stdout)
	}
	if strings.HasPrefix(c.cmd, "nerve khala enroll-token") {
		if r.token = strings.TrimSpace(res.stdout); !strings.HasPrefix(r.token, "khala_enroll_") {
			t.Fatalf("README: %s\nprinted no token: %s", c.line, res)
		}
	}
}

// sh runs cmd with sh in the clone, as a user's shell would.
func (r *readmeRun) sh(home, cmd string) result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Dir, c.Env, c.WaitDelay = r.clone, r.env(home), 5*time.Second
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	res := result{out.String(), errb.String(), 0}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("run %q: %v", cmd, err)
	}
	if ctx.Err() != nil {
		r.t.Fatalf("README command %q did not end within 90s: %s", cmd, res)
	}
	return res
}

// addConfig adds a yaml block to the agent's nerve.yaml, as the README
// asks ("give the agent a sense and a reflex in nerve.yaml").
func (r *readmeRun) addConfig(b readmeBlock) {
	r.t.Helper()
	var yaml strings.Builder
	for _, line := range b.lines {
		code := line
		if loc := commentStart.FindStringIndex(line); loc != nil {
			code = line[:loc[0]]
		}
		r.checkMapped(line, code, r.substitute(code))
		yaml.WriteString(r.substitute(line) + "\n")
	}
	path := filepath.Join(r.agent, ".nerve", "nerve.yaml")
	have, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatalf("README's nerve.yaml block comes before the agent has a nerve.yaml: %v", err)
	}
	merged, err := mergeTopKeys(have, []byte(yaml.String()))
	if err != nil {
		r.t.Fatalf("README's nerve.yaml block: %v", err)
	}
	if err := os.WriteFile(path, merged, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// startKhala starts the queue host's server and waits until it answers;
// it is stopped when the test ends.
func (r *readmeRun) startKhala(cmd string) {
	t := r.t
	t.Helper()
	var out bytes.Buffer
	k := exec.Command("sh", "-c", "exec "+cmd)
	k.Dir, k.Env, k.Stdout, k.Stderr = r.clone, r.env(r.queue), &out, &out
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { k.Wait(); close(done) }()
	t.Cleanup(func() {
		k.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			k.Process.Kill()
			<-done
		}
	})
	waitFor(t, "khala to answer on "+r.khalaAddr, func() bool {
		select {
		case <-done:
			t.Fatalf("README: %s ended: %s", cmd, out.String())
		default:
		}
		resp, err := http.Get("http://" + r.khalaAddr + "/v1/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// makeDemo runs the Makefile's demo recipe with this nerve (-o build: not
// built again into the checkout's bin/) and a NERVE_HOME of the test's,
// and compares what it prints with the README's block.
func (r *readmeRun) makeDemo() {
	t := r.t
	t.Helper()
	if r.demoWant == "" {
		t.Fatal("README's quick start shows no demo output (a bare ``` block)")
	}
	demoHome := filepath.Join(filepath.Dir(r.clone), "demo")
	t.Cleanup(func() { r.stopDaemon(r.agent, demoHome) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "make", "--no-print-directory", "-o", "build", "demo", "BIN="+nerveBin(t), "DEMO_HOME="+demoHome)
	c.Dir, c.Env = r.repo, r.env(r.agent)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	if got, want := normaliseDemo(string(out)), normaliseDemo(r.demoWant); got != want {
		t.Fatalf("make demo printed (normalised):\n%s\n\nthe README shows:\n%s", got, want)
	}
}

// makeTest checks `make test` without running it (it would run this test
// again): its recipe is what the README says it runs.
func (r *readmeRun) makeTest(c readmeCmd) {
	t := r.t
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-n", "test")
	cmd.Dir, cmd.Env = r.repo, r.env(r.agent)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	if !strings.Contains(c.comment, "go test -race ./...") || !strings.Contains(string(out), "test -race") || !strings.Contains(string(out), "./...") {
		t.Fatalf("README says %q of `make test`; its recipe is:\n%s", c.comment, out)
	}
}

// stopDaemon stops the daemon of nerveHome, if one runs, by force when it
// does not stop.
func (r *readmeRun) stopDaemon(home, nerveHome string) {
	pid := (&env{home: nerveHome}).daemonPID()
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		return
	}
	stop := exec.Command(nerveBin(r.t), "daemon", "stop", "--timeout", "20s")
	stop.Env = append(r.env(home), "NERVE_HOME="+nerveHome)
	stop.Run()
	if syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
