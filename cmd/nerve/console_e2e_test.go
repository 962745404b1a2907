package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startConsole runs `nerve console` on a free loopback port and returns
// its one-time sign-in link; the process is stopped at cleanup.
func startConsole(t *testing.T, e *env) string {
	t.Helper()
	cmd := exec.Command(nerveBin(t), "console", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "NERVE_HOME="+e.home)
	cmd.Dir = e.home
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("nerve console did not stop cleanly: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("nerve console did not stop on SIGINT")
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	select {
	case l := <-line:
		i := strings.Index(l, "http://127.0.0.1:")
		if i < 0 {
			t.Fatalf("no link in %q (stderr %s)", l, stderr.String())
		}
		return l[i:]
	case <-time.After(60 * time.Second):
		t.Fatalf("nerve console printed no link; stderr: %s", stderr.String())
	}
	return ""
}

func TestConsoleLocalDaemon(t *testing.T) {
	e := newEnv(t)
	e.write("workflows/quick.yaml", quickWorkflow)
	run := decodeRun(t, e.must(0, "workflow", "run", "quick", "--json"))
	id := run.Thread[strings.IndexByte(run.Thread, '#')+1:]
	link := startConsole(t, e)
	base := link[:strings.Index(link, "/signin")]

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(c *http.Client, url string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get(c, link)
	if resp.StatusCode != 200 || !strings.Contains(page, "Sign out") || !strings.Contains(page, id) {
		t.Fatalf("the link did not sign in to the threads list: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(resp.Request.URL.String(), "code=") {
		t.Errorf("the code stays in the URL after sign-in: %s", resp.Request.URL)
	}
	// The link is spent.
	other, _ := cookiejar.New(nil)
	if resp, page := get(&http.Client{Jar: other}, link); resp.StatusCode != 401 || strings.Contains(page, "Sign out") {
		t.Errorf("a second use of the link: %d", resp.StatusCode)
	}
	for path, want := range map[string]string{
		"/threads/" + id: "author", "/workflows": "quick", "/workflows/quick": "one example turn",
		"/agents": "Capacity", "/queue": "Queue", "/usage": "quick", "/inbox": "issue 16",
	} {
		resp, page := get(c, base+path)
		if resp.StatusCode != 200 || !strings.Contains(page, want) {
			t.Errorf("%s: %d, want %q in:\n%s", path, resp.StatusCode, want, page)
		}
	}
}

func TestConsoleBadInput(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"console", "--addr", "0.0.0.0:7780"},
		{"console", "--addr", "192.0.2.1:80"},
		{"console", "--addr", "nonsense"},
		{"console", "extra"},
	} {
		r := e.must(2, args...)
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("nerve %v: want a line and a hint, got:\n%s", args, r.stderr)
		}
	}
	if e.daemonPID() != 0 {
		t.Error("a refused console started the daemon")
	}
}
