package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/netproxy"
)

func TestSandboxExecBadInput(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sandbox-exec"}, 2, "requires at least 1 arg"},
		{[]string{"sandbox-exec", "--forward", "nope", "--", "true"}, 2, `forward "nope": "nope" is not host:port`},
		{[]string{"sandbox-exec", "--forward", "127.0.0.1:1", "--", "true"}, 2, "need --proxy SOCKET"},
		{[]string{"sandbox-exec", "--", "no-such-command-here"}, 1, "no-such-command-here: command not found"},
		{[]string{"sandbox-exec", "--proxy", "/nonexistent/sock", "--listen-proxy", "203.0.113.1:1", "--", "true"}, 1, "listen on 203.0.113.1:1 inside the sandbox"},
	} {
		r := e.run(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("nerve %v: want exit %d and %q on one line (and a hint):\n%s", c.args, c.code, c.want, r)
		}
	}
}

// TestSandboxExecRunsTheChild: the child's own flags stay its own, its
// status is the command's, and a SIGTERM reaches it.
func TestSandboxExecRunsTheChild(t *testing.T) {
	e := newEnv(t)
	if r := e.run("sandbox-exec", "sh", "-c", "echo $0 \"$@\"; exit 3", "--proxy", "x"); r.code != 3 || r.stdout != "--proxy x\n" {
		t.Errorf("want the child's output and status 3:\n%s", r)
	}
	cmd := exec.Command(nerveBin(t), "sandbox-exec", "--", "sh", "-c", `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("child did not start: %q", sc.Text())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	sc.Scan()
	err := cmd.Wait()
	if sc.Text() != "got-term" || cmd.ProcessState.ExitCode() != 7 {
		t.Errorf("SIGTERM: child said %q, sandbox-exec exited %v; want got-term and 7", sc.Text(), err)
	}
}

// TestSandboxExecBridgesANetworkNamespace runs the bridge where it runs
// for real: in a network namespace of its own (bwrap --unshare-net), with
// only the proxy's socket bound in. A loopback model endpoint answers at
// its own address inside, through the forward; an allowed host answers
// through the proxy port; another host is refused.
func TestSandboxExecBridgesANetworkNamespace(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap is not installed")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "model says hi to %s", r.Header.Get("X-Api-Key"))
	}))
	defer model.Close()
	host := strings.TrimPrefix(model.URL, "http://")
	pol, _ := netproxy.NewPolicy([]string{host})
	dir := t.TempDir()
	sock := filepath.Join(dir, "proxy.sock")
	var refused []string
	p, err := netproxy.Listen(sock, netproxy.Options{Policy: pol, Refused: func(h string) { refused = append(refused, h) },
		Secrets: []netproxy.Secret{{Host: "127.0.0.1", Header: "X-Api-Key", Value: "the-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bin := nerveBin(t)
	script := fmt.Sprintf(`set -u
%[1]s -sS --max-time 5 http://%[2]s/v1 ; echo
%[1]s -sS --max-time 5 --noproxy '' -x http://127.0.0.1:3128 http://%[2]s/v1 ; echo
%[1]s -sS --max-time 5 -o /dev/null -w '%%{http_code}' -x http://127.0.0.1:3128 http://example.com/ ; echo
%[1]s -sS --max-time 5 --noproxy '*' http://example.com/ >/dev/null 2>&1 && echo direct-ok || echo direct-refused
`, curl, host)
	cmd := exec.Command(bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run",
		"--ro-bind", bin, bin, "--bind", dir, "/run/nerve", "--unshare-net", "--unshare-pid", "--die-with-parent",
		"--", bin, "sandbox-exec", "--proxy", "/run/nerve/proxy.sock", "--listen-proxy", "127.0.0.1:3128",
		"--forward", host, "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	done := make(chan struct{})
	time.AfterFunc(30*time.Second, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	if err != nil {
		t.Fatalf("bwrap: %v\n%s", err, out)
	}
	want := "model says hi to the-key\nmodel says hi to the-key\n403\ndirect-refused\n"
	if string(out) != want {
		t.Errorf("inside the sandbox:\n%s\nwant:\n%s", out, want)
	}
	p.Close() // its goroutines are done: refused is settled
	if strings.Join(refused, " ") != "example.com" {
		t.Errorf("refused: %q", refused)
	}
}
