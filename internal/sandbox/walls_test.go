package sandbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needBwrap skips a test that runs bwrap where it does not work, unless
// NERVE_REQUIRE_BWRAP=1 says it must run (CI).
func needBwrap(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("NERVE_REQUIRE_BWRAP") == "1" {
			t.Fatalf("NERVE_REQUIRE_BWRAP=1: %v", err)
		}
		t.Skip(err)
	}
}

// room is a turn's surroundings on the host: the owner's HOME with a key
// in it, NERVE_HOME with its tokens, database and socket, a workdir, and
// a directory outside everything the sandbox shows.
type room struct {
	home, nerveHome, workdir, outside, bin string
}

func newRoom(t *testing.T) *room {
	t.Helper()
	r := &room{home: os.Getenv("HOME")} // testhome's
	r.nerveHome = filepath.Join(r.home, ".nerve")
	tmp := t.TempDir()
	r.workdir, r.outside, r.bin = filepath.Join(tmp, "work"), filepath.Join(tmp, "outside"), filepath.Join(tmp, "bin")
	for _, f := range []struct{ path, body string }{
		{filepath.Join(r.home, ".ssh", "id_ed25519"), "PRIVATE KEY"},
		{filepath.Join(r.home, ".gitconfig"), "[user]\n\tname = o\n"},
		{filepath.Join(r.nerveHome, "tokens", "origin"), "TOKEN"},
		{filepath.Join(r.nerveHome, "nerve.db"), "DB"},
		{filepath.Join(r.nerveHome, "snapshots", "t.jsonl"), "{\"step\":1}\n"},
		{filepath.Join(r.workdir, "task.txt"), "the task"},
		{filepath.Join(r.outside, "keep.txt"), "keep"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(r.nerveHome, "sandbox", "claude", ".claude"), 0o700)
	l, err := net.Listen("unix", filepath.Join(r.nerveHome, "nerve.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); os.RemoveAll(r.nerveHome) })
	return r
}

func (r *room) spec() *Spec {
	return &Spec{
		Workdir: r.workdir, Home: r.home, Hide: []string{r.nerveHome},
		Read:    []string{filepath.Join(r.home, ".gitconfig"), filepath.Join(r.nerveHome, "snapshots", "t.jsonl")},
		State:   []Bind{{Src: filepath.Join(r.nerveHome, "sandbox", "claude", ".claude"), Dst: filepath.Join(r.home, ".claude"), Write: true}},
		Env:     []string{"PATH=/usr/bin:/bin", "HOME=" + r.home, "NERVE_THREAD=w#thread-1"},
		Network: NetAllowList,
	}
}

// run runs script (bash) in s and returns its output.
func run(t *testing.T, r *room, s *Spec, script string) string {
	t.Helper()
	agent := filepath.Join(r.bin, "agent.sh")
	os.MkdirAll(r.bin, 0o700)
	if err := os.WriteFile(agent, []byte("#!/bin/bash\n"+script), 0o700); err != nil {
		t.Fatal(err)
	}
	path, argv, env := s.Command(agent, nil)
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env, cmd.Dir = env, s.Workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("sandboxed script: %v\nstdout: %s\nstderr: %s", err, out.String(), errs.String())
	}
	return out.String()
}

// From inside, the owner's key, NERVE_HOME's tokens, database and socket
// are not there, nothing outside the workdir and the CLI's state can be
// written (HOME is a tmpfs of its own: what is written there is gone
// with the sandbox), and only the given environment is seen; the
// workdir, the listed files and the snapshot are, and the script still
// answers.
func TestSandboxWalls(t *testing.T) {
	needBwrap(t)
	t.Setenv("PGPASSWORD", "hunter2")
	r := newRoom(t)
	out := run(t, r, r.spec(), fmt.Sprintf(`
try() { if eval "$2" >/dev/null 2>&1; then echo "LEAK $1"; else echo "refused $1"; fi; }
try key 'cat %[1]s/.ssh/id_ed25519'
try tokens 'cat %[2]s/tokens/*'
try db 'cat %[2]s/nerve.db'
try socket 'test -e %[2]s/nerve.sock'
try outside 'echo x >%[3]s/new.txt'
try outside-rm 'rm %[3]s/keep.txt'
try root 'echo x >/evil'
try usr 'echo x >/usr/evil'
try nerve-home 'echo x >%[2]s/evil'
echo x >%[1]s/evil && echo "home is scratch"
try pgpassword 'env | grep -q PGPASSWORD'
try ptrace-daemon 'kill -0 1 && test "$(cat /proc/1/comm)" != bwrap'
echo "gitconfig $(cat %[1]s/.gitconfig | head -1)"
echo "snapshot $(cat %[2]s/snapshots/t.jsonl)"
echo "task $(cat task.txt)"
echo done >answer.txt && echo "wrote workdir"
echo state >%[1]s/.claude/s && echo "wrote state"
echo "tmp $(echo t >/tmp/t && cat /tmp/t)"
echo "env $(env | grep -v '^_=\|^PWD=\|^SHLVL=' | sort | tr '\n' ' ')"
echo answer
`, r.home, r.nerveHome, r.outside))
	t.Log(out)
	if strings.Contains(out, "LEAK") {
		t.Errorf("a wall has a hole:\n%s", out)
	}
	for _, w := range []string{"refused key", "refused tokens", "refused db", "refused socket", "refused outside\n", "refused outside-rm",
		"refused root", "refused usr", "refused nerve-home", "refused pgpassword", "home is scratch", "gitconfig [user]", `snapshot {"step":1}`, "task the task",
		"wrote workdir", "wrote state", "tmp t", "env HOME=" + r.home + " NERVE_THREAD=w#thread-1 PATH=/usr/bin:/bin \n", "answer\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s", w, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.workdir, "answer.txt")); err != nil || string(b) != "done\n" {
		t.Errorf("the workdir's write did not reach the host: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(r.nerveHome, "sandbox", "claude", ".claude", "s")); err != nil || string(b) != "state\n" {
		t.Errorf("the state's write did not reach its per-adapter directory: %q %v", b, err)
	}
	for _, p := range []string{filepath.Join(r.outside, "new.txt"), filepath.Join(r.home, "evil"), filepath.Join(r.home, ".claude")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s appeared on the host", p)
		}
	}
	if _, err := os.Stat(filepath.Join(r.outside, "keep.txt")); err != nil {
		t.Errorf("keep.txt: %v", err)
	}
}

// Nothing a sandboxed command starts outlives it: a background job, a
// nohup'ed one, and one that double-forked into a session of its own are
// all gone the moment the command has exited.
func TestSandboxNothingOutlives(t *testing.T) {
	needBwrap(t)
	r := newRoom(t)
	out := run(t, r, r.spec(), `
nohup sleep 300.101 >/dev/null 2>&1 &
sleep 300.102 </dev/null >/dev/null 2>&1 &
setsid sh -c 'sh -c "sleep 300.103 </dev/null >/dev/null 2>&1 &" &' </dev/null >/dev/null 2>&1
sleep 0.1
echo "running $(pgrep -c -f 'sleep 300.10')"
echo answer
`)
	if !strings.Contains(out, "running 3\n") || !strings.HasSuffix(out, "answer\n") {
		t.Fatalf("the escapees did not start:\n%s", out)
	}
	// The kernel kills what is left in the pid namespace as its init
	// exits, which may end a moment after bwrap reported the command's
	// exit: they are SIGKILLed by then, so allow a moment for it.
	left := procsMatching("sleep 300.10")
	for deadline := time.Now().Add(time.Second); len(left) > 0 && time.Now().Before(deadline); left = procsMatching("sleep 300.10") {
		time.Sleep(5 * time.Millisecond)
	}
	if len(left) > 0 {
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes outlived the sandbox: %v", left)
	}
}

// Without network: open the sandbox has no network of its own, so a
// server on the host's loopback is out of reach; with it, it is not.
func TestSandboxNetwork(t *testing.T) {
	needBwrap(t)
	r := newRoom(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("if (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo connected; else echo refused; fi\n", port)
	for _, c := range []struct{ network, want string }{{NetAllowList, "refused"}, {NetNone, "refused"}, {NetOpen, "connected"}} {
		s := r.spec()
		s.Network = c.network
		if out := run(t, r, s, script); strings.TrimSpace(out) != c.want {
			t.Errorf("network %s: %q, want %s", c.network, out, c.want)
		}
	}
}

// procsMatching lists the pids whose command line contains s.
func procsMatching(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			out = append(out, pid)
		}
	}
	return out
}
