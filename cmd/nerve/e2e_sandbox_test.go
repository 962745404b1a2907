package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/sandbox"
)

// needBwrap skips a test that needs a working bwrap, unless
// NERVE_REQUIRE_BWRAP=1 says it must run (CI).
func needBwrap(t testing.TB) {
	t.Helper()
	if err := sandbox.Available(); err != nil {
		if os.Getenv("NERVE_REQUIRE_BWRAP") == "1" {
			t.Fatalf("NERVE_REQUIRE_BWRAP=1: %v", err)
		}
		t.Skip(err)
	}
}

// attackAgent is a fake agent that tries, from inside its turn, what a
// hostile prompt would make an agent try, says what worked, leaves
// processes behind that would write a file later, and answers.
const attackAgent = `#!/bin/sh
cat >/dev/null
try() { if sh -c "$2" >/dev/null 2>&1; then echo "LEAK $1"; else echo "refused $1"; fi; }
try ssh-key 'cat @HOME@/.ssh/id_ed25519'
try tokens 'cat @NH@/tokens/*'
try nerve.db 'cat @NH@/nerve.db'
try nerve.yaml 'cat @NH@/nerve.yaml'
try nerve.sock 'NERVE_HOME=@NH@ nerve daemon status'
try write-outside 'echo x >@OUTSIDE@/planted'
try pgpassword 'test -n "$PGPASSWORD"'
try aws-keys 'env | grep -q ^AWS_'
nohup sh -c 'sleep 6; echo late >@WORK@/late-nohup' >/dev/null 2>&1 &
setsid sh -c 'sh -c "sleep 6; echo late >@WORK@/late-setsid" </dev/null >/dev/null 2>&1 &' </dev/null >/dev/null 2>&1
nohup sleep 300.2071 >/dev/null 2>&1 &
nerve thread messages >/dev/null 2>&1 && echo "read its own thread"
echo work >@WORK@/result.txt && echo "wrote its workdir"
echo answer
`

// sandboxWorld is one daemon home with secrets planted where an agent
// must not reach them, a workdir, a directory outside it, and the
// attack agent (outside NERVE_HOME, as an installed CLI is).
type sandboxWorld struct {
	e                   *env
	work, outside, home string
}

func newSandboxWorld(t *testing.T) *sandboxWorld {
	w := &sandboxWorld{e: newEnv(t), work: t.TempDir(), outside: t.TempDir(), home: os.Getenv("HOME")}
	key := filepath.Join(w.home, ".ssh", "id_ed25519")
	os.MkdirAll(filepath.Dir(key), 0o700)
	if err := os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(key)) })
	w.e.write("tokens/origin", "nrv_secret_token")
	bin := filepath.Join(t.TempDir(), "agent.sh")
	script := strings.NewReplacer("@HOME@", w.home, "@NH@", w.e.home, "@OUTSIDE@", w.outside, "@WORK@", w.work).Replace(attackAgent)
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	// The daemon's own secrets, which no turn may see.
	w.e.extra = append(w.e.extra, "PGPASSWORD=hunter2", "AWS_SECRET_ACCESS_KEY=aws-secret")
	w.e.write("nerve.yaml", "adapters:\n  attacker:\n    type: exec\n    command: ["+bin+"]\n")
	w.e.write("attack.yaml", `workflow: attack
moderator: 'last = null ? {"role": "worker", "instruction": "try everything"} : {"done": true}'
roles:
  worker: {adapter: attacker, prompt: Escape.}
`)
	return w
}

// answer runs the attack workflow in the workdir and returns the turn's
// answer.
func (w *sandboxWorld) answer(t *testing.T) string {
	t.Helper()
	r := decodeRun(t, w.e.must(0, "workflow", "run", filepath.Join(w.e.home, "attack.yaml"), "--workdir", w.work, "--json"))
	if r.Status != "completed" {
		t.Fatalf("the turn did not complete: %+v", r)
	}
	s, _ := r.Result.(string)
	return s
}

// In the default posture (daemon.sandbox: auto, bwrap working) a turn
// cannot read the owner's ssh key, NERVE_HOME's tokens, database or
// nerve.yaml, reach the daemon's socket, write outside its workdir, or
// see the daemon's secrets in its environment; what it leaves running
// (nohup, setsid after a double fork) is gone with the turn. It still
// reads its own thread, writes its workdir and answers.
func TestE2ESandboxWalls(t *testing.T) {
	needBwrap(t)
	w := newSandboxWorld(t)
	out := w.answer(t)
	t.Log(out)
	for _, want := range []string{"refused ssh-key", "refused tokens", "refused nerve.db", "refused nerve.yaml", "refused nerve.sock",
		"refused write-outside", "refused pgpassword", "refused aws-keys", "read its own thread", "wrote its workdir", "answer"} {
		if !strings.Contains(out, want+"\n") && !strings.HasSuffix(out, want) {
			t.Errorf("missing %q in the answer:\n%s", want, out)
		}
	}
	if strings.Contains(out, "LEAK") {
		t.Errorf("a wall has a hole:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(w.work, "result.txt")); err != nil || string(b) != "work\n" {
		t.Errorf("the workdir's file: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(w.outside, "planted")); err == nil {
		t.Error("the turn wrote outside its workdir")
	}
	// Nothing of the turn is left: the sleeper is gone at once, and the
	// late writers never write.
	waitFor(t, "the turn's leftover process to be gone", func() bool { return len(pidsRunning("sleep 300.2071")) == 0 })
	time.Sleep(6500 * time.Millisecond)
	for _, f := range []string{"late-nohup", "late-setsid"} {
		if _, err := os.Stat(filepath.Join(w.work, f)); err == nil {
			t.Errorf("a process the turn left behind wrote %s after it", f)
		}
	}

	var st struct {
		Sandbox struct {
			Mode, Effective, Network string
			Warning                  *string
		} `json:"sandbox"`
	}
	if err := json.Unmarshal([]byte(w.e.must(0, "daemon", "status", "--json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Sandbox.Mode != "auto" || st.Sandbox.Effective != "bwrap" || st.Sandbox.Network != "allow-list" || st.Sandbox.Warning != nil {
		t.Errorf("daemon status --json sandbox: %+v", st.Sandbox)
	}
	if r := w.e.must(0, "daemon", "status"); !strings.Contains(r.stdout, "sandbox:  bwrap · network allow-list (daemon.sandbox: auto)\n") {
		t.Errorf("daemon status:\n%s", r.stdout)
	}
}

// With NERVE_DAEMON_SANDBOX=none (a person debugging a fake agent) the
// same agent runs as the owner: it sees what the sandbox hid, which is
// what makes TestE2ESandboxWalls's refusals the sandbox's doing.
func TestE2ESandboxNone(t *testing.T) {
	w := newSandboxWorld(t)
	w.e.extra = append(w.e.extra, "NERVE_DAEMON_SANDBOX=none")
	out := w.answer(t)
	for _, want := range []string{"LEAK ssh-key", "LEAK tokens", "LEAK pgpassword", "LEAK write-outside", "answer"} {
		if !strings.Contains(out, want) {
			t.Errorf("without a sandbox, missing %q in:\n%s", want, out)
		}
	}
	for _, p := range pidsRunning("sleep 300.2071") {
		syscall.Kill(p, syscall.SIGKILL) // the daemon's sweep may not have got to it yet
	}
	time.Sleep(6500 * time.Millisecond) // unwalled, the late writers may write before the workdir goes
	if r := w.e.must(0, "daemon", "status"); !strings.Contains(r.stdout, "sandbox:  none\n") {
		t.Errorf("daemon status:\n%s", r.stdout)
	}
}

// A bad sandbox mode is a configuration error naming its line, or the
// variable that set it, and the modes there are.
func TestE2ESandboxBadMode(t *testing.T) {
	e := newEnv(t)
	e.write("nerve.yaml", "agent: {name: a1}\ndaemon:\n  sandbox: maybe\n")
	r := e.must(2, "validate")
	if !strings.Contains(r.stderr+r.stdout, `nerve.yaml:3: daemon.sandbox: unknown sandbox mode "maybe" (want one of auto, bwrap, none)`) {
		t.Errorf("validate:\n%s", r)
	}
	e.write("nerve.yaml", "agent: {name: a1}\n")
	e.extra = append(e.extra, "NERVE_DAEMON_SANDBOX=maybe")
	r = e.must(2, "daemon", "start")
	if want := `NERVE_DAEMON_SANDBOX="maybe": unknown sandbox mode "maybe" (want one of auto, bwrap, none)`; !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
		t.Errorf("daemon start: want one line with %q\n%s", want, r)
	}
}

// pidsRunning lists the pids whose command line contains s.
func pidsRunning(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			continue
		}
		var pid int
		for _, c := range e.Name() {
			pid = pid*10 + int(c-'0')
		}
		out = append(out, pid)
	}
	return out
}

// unsandboxed has this env's daemon run turns without a sandbox
// (NERVE_DAEMON_SANDBOX=none, as a person debugging a fake agent would):
// for a test whose fake agent shares NERVE_HOME with the test (its flags,
// outputs and escapees live there) or reaches the daemon through
// nerve.sock, both of which the sandbox hides by design. why says which;
// the sandboxed posture is TestE2ESandbox*'s.
func (e *env) unsandboxed(why string) {
	e.t.Helper()
	if why == "" {
		e.t.Fatal("say why the test runs unsandboxed")
	}
	e.extra = append(e.extra, "NERVE_DAEMON_SANDBOX=none")
}

// Where bwrap is missing, auto runs turns unsandboxed and says so in
// `nerve init` and `nerve daemon status` (--json: sandbox.warning);
// daemon.sandbox: bwrap fails the turn instead, naming the fix.
func TestE2ESandboxAutoWithoutBwrap(t *testing.T) {
	w := newSandboxWorld(t)
	// PATH: everything of /usr/bin but bwrap.
	bin := t.TempDir()
	ents, err := os.ReadDir("/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "bwrap" {
			os.Symlink(filepath.Join("/usr/bin", e.Name()), filepath.Join(bin, e.Name()))
		}
	}
	w.e.extra = append(w.e.extra, "PATH="+bin)
	const warning = "bwrap not found on PATH: turns run without a sandbox, as you, with all you can read"
	if r := w.e.must(0, "init"); !strings.Contains(r.stdout, "! sandbox") || !strings.Contains(r.stdout, warning) || !strings.Contains(r.stdout, "apt-get install bubblewrap") {
		t.Errorf("init does not warn:\n%s", r.stdout)
	}
	if out := w.answer(t); !strings.Contains(out, "LEAK pgpassword") {
		t.Errorf("auto without bwrap: want an unsandboxed turn, got:\n%s", out)
	}
	for _, p := range pidsRunning("sleep 300.2071") {
		syscall.Kill(p, syscall.SIGKILL)
	}
	time.Sleep(6500 * time.Millisecond) // unwalled, the late writers may write before the workdir goes
	var st struct {
		Sandbox struct {
			Effective string
			Warning   *string
		} `json:"sandbox"`
	}
	json.Unmarshal([]byte(w.e.must(0, "daemon", "status", "--json").stdout), &st)
	if st.Sandbox.Effective != "none" || st.Sandbox.Warning == nil || *st.Sandbox.Warning != warning {
		t.Errorf("daemon status --json sandbox: %+v", st.Sandbox)
	}
	if r := w.e.must(0, "daemon", "status"); !strings.Contains(r.stdout, "sandbox:  none (daemon.sandbox: auto)\n  WARNING: "+warning+"\n") {
		t.Errorf("daemon status:\n%s", r.stdout)
	}
	w.e.must(0, "daemon", "stop")
	w.e.write("nerve.yaml", "adapters:\n  attacker:\n    type: exec\n    sandbox: bwrap\n    command: [/bin/true]\n")
	run := decodeRun(t, w.e.must(0, "workflow", "run", filepath.Join(w.e.home, "attack.yaml"), "--workdir", w.work, "--json"))
	msgs := w.e.must(0, "thread", "messages", run.Thread, "--json").stdout
	if !strings.Contains(msgs, `sandbox: bwrap does not work here: bwrap not found on PATH (adapter attacker has sandbox: bwrap; install bubblewrap, or set sandbox: none)`) {
		t.Errorf("sandbox: bwrap without bwrap: the turn's message:\n%s", msgs)
	}
}
