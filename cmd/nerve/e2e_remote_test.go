package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// khalaServer runs `nerve khala serve` on a free loopback port.
type khalaServer struct {
	url, db string
	pg      string // a PostgreSQL DSN: the server runs on it instead of db
	cmd     *exec.Cmd
}

func startKhala(t testing.TB) *khalaServer {
	t.Helper()
	addr := freeAddr(t)
	dir := t.TempDir()
	s := &khalaServer{url: "http://" + addr, db: filepath.Join(dir, "khala.db")}
	s.start(t)
	t.Cleanup(s.stop)
	return s
}

// start runs the server on s's address and database and waits until it
// answers.
func (s *khalaServer) start(t testing.TB) {
	t.Helper()
	dir := filepath.Dir(s.db)
	// The tests' webhook receivers listen on loopback, which Khala
	// refuses by default.
	s.cmd = exec.Command(nerveBin(t), "khala", "serve", "--addr", strings.TrimPrefix(s.url, "http://"), s.dbFlag(), s.dbArg(),
		"--webhook-allow", "127.0.0.1")
	s.cmd.Env = append(os.Environ(), "NERVE_HOME="+dir)
	logf, _ := os.OpenFile(filepath.Join(dir, "khala.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	err := s.cmd.Start()
	logf.Close() // the server has its own descriptor
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "khala to answer", func() bool {
		resp, err := http.Get(s.url + "/v1/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
}

// stop ends the server as an operator would (SIGTERM), killing it after
// ten seconds; a stopped server may be started again.
func (s *khalaServer) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

func (s *khalaServer) dbFlag() string {
	if s.pg != "" {
		return "--postgres"
	}
	return "--db"
}

func (s *khalaServer) dbArg() string {
	if s.pg != "" {
		return s.pg
	}
	return s.db
}

func (s *khalaServer) enrollToken(t testing.TB, uses int) string {
	t.Helper()
	out, err := exec.Command(nerveBin(t), "khala", "enroll-token", s.dbFlag(), s.dbArg(), "--uses", fmt.Sprint(uses)).Output()
	if err != nil {
		t.Fatalf("enroll-token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// agentEnv is a NERVE_HOME whose daemon serves origin's queue with a
// fake agent script.
func agentEnv(t testing.TB, k *khalaServer, token, name, script, senseExtra string, capacity int) *env {
	e := newEnv(t)
	e.write("agent.sh", "#!/bin/sh\n"+script)
	e.write("nerve.yaml", fmt.Sprintf(`agent: {name: %s, max_concurrent_turns: %d}
remotes:
  origin: {url: "%s"}
adapters:
  fake: {type: exec, command: [%s/agent.sh], timeout: 60s}
senses:
  - {name: queue, kind: khala, remote: origin%s}
reflexes:
  - {on: queue, do: turn, adapter: fake}
daemon: {shutdown_grace: 1s}
`, name, capacity, k.url, e.home, senseExtra))
	r := e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", token)
	if !strings.Contains(r.stdout, "accepts this agent as "+name) {
		t.Fatalf("init: %s", r)
	}
	tok, err := os.Stat(filepath.Join(e.home, "tokens", "origin"))
	if err != nil || tok.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", tok, err)
	}
	return e
}

const authorScript = `echo "author $NERVE_STEP by $(basename $NERVE_HOME)"
`
const reviewerScript = `n=$(nerve thread messages --role reviewer --json | wc -l)
if [ "$n" -ge 1 ]; then a=true; else a=false; fi
printf 'review\n` + "```json" + `\n{"approved": %s, "findings": ["x"]}\n` + "```" + `\n' "$a"
`

func TestE2ERemoteCodeReviewAcrossTwoDaemons(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", authorScript, ", roles: [author]", 1)
	b := agentEnv(t, k, tok, "agent-b", reviewerScript, ", roles: [reviewer]", 1)
	a.must(0, "workflow", "push", repoFile(t, "examples/code-review.yaml"), "origin")
	a.must(0, "daemon", "start")
	b.must(0, "daemon", "start")

	list := a.must(0, "workflow", "list", "--json")
	if !strings.Contains(list.stdout, `"ref":"origin/code-review"`) {
		t.Fatalf("workflow list: %s", list)
	}
	r := a.must(0, "workflow", "run", "origin/code-review", "-i", "change=x", "--json")
	out := decodeRun(t, r)
	if out.Status != "completed" || !strings.HasPrefix(out.Thread, "origin/code-review#thread-") {
		t.Fatalf("remote run: %s", r)
	}
	ref := out.Thread
	msgs := b.must(0, "thread", "messages", ref, "--json")
	if !strings.Contains(msgs.stdout, `"agent":"agent-a"`) || !strings.Contains(msgs.stdout, `"agent":"agent-b"`) {
		t.Fatalf("both agents must have answered: %s", msgs)
	}
	if n := strings.Count(msgs.stdout, "\n"); n != 4 {
		t.Fatalf("want 4 messages (2 rounds), got %d", n)
	}
	logs := a.must(0, "workflow", "logs", ref)
	if !strings.Contains(logs.stdout, "completed") {
		t.Fatalf("remote logs: %s", logs)
	}
	st := a.must(0, "daemon", "status", "--json")
	if !strings.Contains(st.stdout, `"state":"polling"`) {
		t.Fatalf("status senses: %s", st)
	}
}

// kill -9 of a daemon in the middle of a turn: the turn is re-queued when
// its lease runs out and done by the other daemon; no answer is recorded
// twice.
func TestE2ERemoteKill9RequeuesToTheOtherDaemon(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	slow := "sleep 300\n"
	a := agentEnv(t, k, tok, "agent-a", slow, "", 1)
	b := agentEnv(t, k, tok, "agent-b", "echo done by b\n", "", 1)
	a.write("one.yaml", "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nlimits: {claim: 2s}\nroles:\n  w: {adapter: x, prompt: p}\n")
	a.must(0, "workflow", "push", filepath.Join(a.home, "one.yaml"), "origin")
	a.must(0, "daemon", "start")
	r := a.must(0, "workflow", "run", "origin/one", "--detach")
	ref := strings.TrimSpace(r.stdout)
	waitFor(t, "agent a to run the turn", func() bool {
		return strings.Contains(a.must(0, "daemon", "status", "--json").stdout, `"role":"w"`)
	})
	syscall.Kill(a.daemonPID(), syscall.SIGKILL)
	b.must(0, "daemon", "start")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := b.runCtx(ctx, "workflow", "logs", ref, "-f", "--json")
	if res.code != 0 || strings.Count(res.stdout, "\n") != 1 || !strings.Contains(res.stdout, "done by b") {
		t.Fatalf("after kill -9: %s", res)
	}
}

func TestE2ERemoteSIGTERMReleasesAtOnce(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	a := agentEnv(t, k, tok, "agent-a", "sleep 300\n", "", 1)
	b := agentEnv(t, k, tok, "agent-b", "echo done by b\n", "", 1)
	// A long lease: only the release can hand the turn over quickly.
	a.write("one.yaml", "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nlimits: {claim: 10m}\nroles:\n  w: {adapter: x, prompt: p}\n")
	a.must(0, "workflow", "push", filepath.Join(a.home, "one.yaml"), "origin")
	a.must(0, "daemon", "start")
	ref := strings.TrimSpace(a.must(0, "workflow", "run", "origin/one", "--detach").stdout)
	waitFor(t, "agent a to run the turn", func() bool {
		return strings.Contains(a.must(0, "daemon", "status", "--json").stdout, `"role":"w"`)
	})
	start := time.Now()
	a.must(0, "daemon", "stop")
	b.must(0, "daemon", "start")
	res := b.must(0, "workflow", "logs", ref, "-f", "--json")
	if !strings.Contains(res.stdout, "done by b") || time.Since(start) > 20*time.Second {
		t.Fatalf("after SIGTERM (%s): %s", time.Since(start), res)
	}
	var trace []map[string]any
	tr := b.must(0, "workflow", "logs", ref)
	_ = json.Unmarshal(nil, &trace)
	if !strings.Contains(tr.stdout, "completed") {
		t.Fatalf("trace: %s", tr)
	}
}

// With capacity 1 a daemon never runs two adapters at once; with 2 it does
// (so the check can fail).
func TestE2ERemoteCapacity(t *testing.T) {
	k := startKhala(t)
	tok := k.enrollToken(t, 2)
	script := `if ! mkdir "$NERVE_HOME/busy" 2>/dev/null; then touch "$NERVE_HOME/overlap"; fi
sleep 0.4
rmdir "$NERVE_HOME/busy" 2>/dev/null
echo ok
`
	for _, c := range []struct {
		capacity int
		overlap  bool
	}{{1, false}, {2, true}} {
		e := agentEnv(t, k, tok, fmt.Sprintf("cap-%d", c.capacity), script, "", c.capacity)
		e.unsandboxed("its agents detect an overlap with a lock directory in NERVE_HOME")
		e.write("par.yaml", "workflow: par"+fmt.Sprint(c.capacity)+"\nmoderator: 'last = null ? [{\"role\": \"w\"}, {\"role\": \"w\"}, {\"role\": \"w\"}, {\"role\": \"w\"}] : {\"done\": true}'\nroles:\n  w: {adapter: x, prompt: p}\n")
		e.must(0, "workflow", "push", filepath.Join(e.home, "par.yaml"), "origin")
		e.must(0, "daemon", "start")
		e.must(0, "workflow", "run", "origin/par"+fmt.Sprint(c.capacity))
		e.must(0, "daemon", "stop")
		_, err := os.Stat(filepath.Join(e.home, "overlap"))
		if overlapped := err == nil; overlapped != c.overlap {
			t.Fatalf("capacity %d: adapters overlapped = %v", c.capacity, overlapped)
		}
	}
}

// Enrollment and the remote check against a real server: a wrong or used
// enrollment token, a taken name, a token the server does not know.
func TestE2EInitAgainstKhala(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {name: solo}\n")
	r := e.must(1, "init", "--remote", "origin="+k.url, "--enroll-token", "khala_enroll_wrong")
	if !strings.Contains(r.stderr, "refused the enrollment token") || !strings.Contains(r.stderr, "hint: ") {
		t.Fatalf("wrong enrollment token: %s", r)
	}
	if cfg, _ := os.ReadFile(filepath.Join(e.home, "nerve.yaml")); strings.Contains(string(cfg), "origin") {
		t.Fatalf("a refused enrollment must leave nerve.yaml as it was:\n%s", cfg)
	}
	tok := k.enrollToken(t, 1)
	e.must(0, "init", "--remote", "origin="+k.url, "--enroll-token", tok)
	used := newEnv(t)
	r = used.must(1, "init", "--name", "second", "--remote", "origin="+k.url, "--enroll-token", tok)
	if !strings.Contains(r.stderr, "refused the enrollment token") {
		t.Fatalf("a used token: %s", r)
	}
	other := newEnv(t)
	other.write("nerve.yaml", "agent: {name: solo}\n")
	r = other.must(1, "init", "--remote", "origin="+k.url, "--enroll-token", k.enrollToken(t, 1))
	if !strings.Contains(r.stderr, "already has an agent called solo") {
		t.Fatalf("a taken name: %s", r)
	}
	// A token the server does not know: the check fails with how to re-enroll.
	e.write("tokens/origin", "khala_agent_forged\n")
	os.Chmod(filepath.Join(e.home, "tokens/origin"), 0o600)
	e.write("nerve.yaml", fmt.Sprintf("remotes:\n  origin: {url: %q}\nsenses:\n  - {name: q, kind: khala, remote: origin}\nreflexes:\n  - {on: q, do: turn, adapter: example}\n", k.url))
	r = e.must(1, "init")
	if !strings.Contains(r.stdout, "✗ remote origin") || !strings.Contains(r.stdout, "enroll again") {
		t.Fatalf("unknown agent token: %s", r)
	}
}

// Cancelling a remote thread reaches the adapter running its turn: the
// next heartbeat says cancel, and the daemon kills the adapter's group.
func TestE2ERemoteCancelKillsTheAdapter(t *testing.T) {
	k := startKhala(t)
	marker := "nerve-remote-cancel-" + fmt.Sprint(time.Now().UnixNano())
	a := agentEnv(t, k, k.enrollToken(t, 1), "agent-a", "exec sh -c 'sleep 300' "+marker+"\n", "", 1)
	a.write("one.yaml", "workflow: one\nmoderator: 'last = null ? {\"role\": \"w\"} : {\"done\": true}'\nlimits: {claim: 3s}\nroles:\n  w: {adapter: x, prompt: p}\n")
	a.must(0, "workflow", "push", filepath.Join(a.home, "one.yaml"), "origin")
	a.must(0, "daemon", "start")
	ref := strings.TrimSpace(a.must(0, "workflow", "run", "origin/one", "--detach").stdout)
	waitFor(t, "the adapter", func() bool { return len(processesWith(marker)) > 0 })
	r := a.must(0, "workflow", "cancel", ref)
	if !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("cancel: %s", r)
	}
	waitFor(t, "the adapter to be killed", func() bool { return len(processesWith(marker)) == 0 })
}

// `workflow list` shows a remote that refuses this machine's token, or
// gets none, as such, not as unreachable, with the hint other remote
// commands give.
func TestE2EWorkflowListTokenRefused(t *testing.T) {
	k := startKhala(t)
	e := newEnv(t)
	e.write("nerve.yaml", fmt.Sprintf("remotes:\n  refused: {url: %q}\n  tokenless: {url: %q}\n", k.url, k.url))
	e.write("tokens/refused", "khala_agent_forged\n")
	os.Chmod(filepath.Join(e.home, "tokens/refused"), 0o600)
	r := e.must(0, "workflow", "list")
	for _, want := range []string{"refused/    (token refused: unknown agent token (was the agent revoked?))", "tokenless/  (no token: this machine holds none for tokenless)"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("workflow list lacks %q:\n%s", want, r)
		}
	}
	for _, name := range []string{"refused", "tokenless"} {
		hint := fmt.Sprintf("hint: this agent's token for %s is missing or no longer accepted; enroll again: nerve init --remote %s=%s --enroll-token TOKEN", name, name, k.url)
		if !strings.Contains(r.stderr, hint) {
			t.Fatalf("workflow list lacks %q:\n%s", hint, r)
		}
	}
	if r := e.must(0, "workflow", "list", "--json"); !strings.Contains(r.stdout, `"error":"token refused: unknown agent token (was the agent revoked?)"`) || strings.Contains(r.stdout, "unreachable") {
		t.Fatalf("workflow list --json: %s", r)
	}
}
