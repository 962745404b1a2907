package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/testhome"
)

// binDir holds the real nerve binary of this test process (removed by
// TestMain when the tests end).
var binDir = filepath.Join(os.TempDir(), fmt.Sprintf("nerve-test-bin-%d", os.Getpid()))

// buildNerve builds the real nerve binary once, on first use (with -race
// when the tests run with it), so end-to-end tests start real daemons and
// real adapter processes and unit tests build nothing. Without -race it is
// static, as `make build` makes it (the race detector needs cgo).
var buildNerve = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "nerve")
	args := []string{"build", "-o", bin}
	cgo := "CGO_ENABLED=0"
	if raceEnabled {
		args, cgo = append(args, "-race"), "CGO_ENABLED=1"
	}
	build := exec.Command("go", append(args, ".")...)
	build.Env = append(os.Environ(), cgo)
	out, err := build.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build nerve: %v\n%s", err, out)
	}
	return bin, nil
})

// nerveBin is the path of the real nerve binary.
func nerveBin(tb testing.TB) string {
	tb.Helper()
	bin, err := buildNerve()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	// A -race binary sleeps a second at exit (the race runtime's
	// atexit_sleep_ms), so under `make test` every nerve command an e2e
	// test runs, and every daemon it stops, took a second more: most of
	// this package's time. The processes inherit this; races are still
	// reported, and fail the test (exit 66).
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	code := testhome.Run(m)
	os.RemoveAll(binDir)
	os.Exit(code)
}

// env is one agent's world: a NERVE_HOME (short, for the socket path) and
// a workflows directory.
type env struct {
	t     testing.TB
	home  string
	extra []string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	home, err := os.MkdirTemp("", "nh")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: home}
	os.MkdirAll(filepath.Join(home, "workflows"), 0o700)
	t.Cleanup(func() {
		e.stopDaemon()
		os.RemoveAll(home)
	})
	return e
}

// stopDaemon stops this home's daemon however it is: gracefully, then by
// force, so no test leaves a process behind.
func (e *env) stopDaemon() {
	pid := e.daemonPID()
	if pid == 0 {
		return
	}
	e.run("daemon", "stop", "--timeout", "20s")
	if syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func (e *env) daemonPID() int {
	b, err := os.ReadFile(filepath.Join(e.home, "nerve.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func (e *env) write(name, content string) string {
	e.t.Helper()
	path := filepath.Join(e.home, name)
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, []byte(content), 0o700); err != nil {
		e.t.Fatal(err)
	}
	return path
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

func (e *env) run(args ...string) result {
	return e.runCtx(context.Background(), args...)
}

func (e *env) runCtx(ctx context.Context, args ...string) result {
	if _, ok := ctx.Deadline(); !ok {
		// A caller's own deadline stands (slow agent CLIs need more).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, nerveBin(e.t), args...)
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	cmd.Env = append(cmd.Env, e.extra...)
	cmd.Dir = e.home
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run nerve %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs nerve and fails the test unless it exits with code.
func (e *env) must(code int, args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != code {
		e.t.Fatalf("nerve %s: want exit %d, got %s", strings.Join(args, " "), code, r)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		e.t.Fatalf("nerve %s printed a stack trace:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r
}

type runJSON struct {
	Thread string `json:"thread"`
	Status string `json:"status"`
	Result any    `json:"result"`
	Error  string `json:"error"`
}

func decodeRun(t *testing.T, r result) runJSON {
	t.Helper()
	var out runJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r)
	}
	return out
}

// waitFor polls cond (for at most 20s) — for waiting on other processes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// processesWith lists pids whose command line contains marker.
func processesWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// repoFile is a file of the repository (examples).
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// freeAddr is a loopback address nothing listens on (a port the kernel
// just handed out and took back), for a server a test starts.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrapeMetrics is the body of a daemon's /metrics at addr.
func scrapeMetrics(t testing.TB, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
