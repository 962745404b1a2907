package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// khProc is a real `nerve khala serve` process.
type khProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *khLockedBuffer
	done   chan struct{}
}

type khLockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *khLockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *khLockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// khStart runs the server on a free loopback port and waits for the
// line that says where it listens.
func khStart(tb testing.TB, home, db string, extra ...string) *khProc {
	tb.Helper()
	return khStartEnv(tb, []string{"NERVE_HOME=" + home}, append([]string{"--db", db}, extra...)...)
}

// khStartEnv runs `nerve khala serve --addr 127.0.0.1:0 args...` with env
// added to this process's.
func khStartEnv(tb testing.TB, env []string, args ...string) *khProc {
	tb.Helper()
	args = append([]string{"khala", "serve", "--addr", "127.0.0.1:0"}, args...)
	cmd := exec.Command(khServerBin(tb), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &khProc{cmd: cmd, stderr: &khLockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() { p.kill9() })
	select {
	case line := <-lines:
		f := strings.Fields(line) // khala listening on URL (db FILE)
		if len(f) < 4 || f[1] != "listening" {
			tb.Fatalf("unexpected first line %q", line)
		}
		p.url = f[3]
	case <-p.done:
		tb.Fatalf("nerve khala serve exited at once (is newCmdKhala wired into root.go?):\n%s", p.stderr)
	case <-time.After(30 * time.Second):
		tb.Fatalf("nerve khala serve did not start:\n%s", p.stderr)
	}
	return p
}

func (p *khProc) kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// khClient speaks the API for the tests and benchmarks.
type khClient struct {
	url, token string
	http       *http.Client
}

func khNewClient(url, token string) *khClient {
	return &khClient{url: url, token: token, http: &http.Client{Timeout: 2 * time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func (c *khClient) do(method, path string, body any) (int, []byte, error) {
	return c.doCtx(context.Background(), method, path, body)
}

func (c *khClient) doCtx(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// must fails tb unless the request gets status want; out receives the body.
func (c *khClient) must(tb testing.TB, method, path string, body any, want int, out any) {
	tb.Helper()
	status, data, err := c.do(method, path, body)
	if err != nil || status != want {
		tb.Fatalf("%s %s: want %d, got %d %v %s", method, path, want, status, err, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			tb.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

func (c *khClient) enroll(tb testing.TB, name string) *khClient {
	tb.Helper()
	var out struct{ Token string }
	c.must(tb, "POST", "/v1/agents", map[string]string{"name": name}, 201, &out)
	return khNewClient(c.url, out.Token)
}

type khTurn struct {
	Turn, Claim, Thread string
	Step                int
}

// khRelayWF is one role answering turn after turn until input.turns.
const khRelayWF = `workflow: relay
binding: cloud
moderator: '$count(messages) >= input.turns ? {"done": true} : {"role": "worker", "instruction": "step " & ($count(messages) + 1)}'
inputs:
  turns: {type: integer, default: 4}
roles:
  worker: {prompt: You relay.}
limits:
  max_steps: 100000
`

// khSetup starts a server, enrolls agents with a token issued through
// the CLI, and publishes khRelayWF.
func khSetup(tb testing.TB, agents int) (*khProc, []*khClient, string) {
	tb.Helper()
	home, err := os.MkdirTemp("", "kh")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(home) })
	db := filepath.Join(home, "khala.db")
	p := khStart(tb, home, db)
	out, err := exec.Command(khServerBin(tb), "khala", "enroll-token", "--db", db, "--uses", fmt.Sprint(agents)).Output()
	if err != nil {
		tb.Fatalf("enroll-token: %v", err)
	}
	enroller := khNewClient(p.url, strings.TrimSpace(string(out)))
	var cs []*khClient
	for i := range agents {
		cs = append(cs, enroller.enroll(tb, fmt.Sprintf("agent-%d", i)))
	}
	status, data, err := cs[0].do("PUT", "/v1/workflows/relay", map[string]string{"source": khRelayWF})
	if err != nil || status != 201 {
		tb.Fatalf("publish: %d %v %s", status, err, data)
	}
	return p, cs, db
}

// TestKhalaKill9KeepsAcknowledgedResponses kills the server process with
// SIGKILL right after it answered 200 to a response, while other agents
// are mid-request, and restarts it on the same file: every acknowledged
// response is there, and leases granted before the crash still hold.
func TestKhalaKill9KeepsAcknowledgedResponses(t *testing.T) {
	p, agents, db := khSetup(t, 4)
	for range 8 {
		agents[0].must(t, "POST", "/v1/workflows/relay/threads", map[string]any{"input": map[string]any{"turns": 100000}}, 201, nil)
	}
	var (
		mu       sync.Mutex
		acked    = map[string]string{} // turn -> content the server acknowledged
		inFlight = map[string]khTurn{}
		holder   = map[string]string{} // in-flight turn -> its agent's token
		killOnce sync.Once
		wg       sync.WaitGroup
	)
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				status, data, err := a.do("POST", "/v1/turns/claim", map[string]any{"wait": "1s"})
				if err != nil || status != 200 {
					return
				}
				var ts []khTurn
				json.Unmarshal(data, &ts)
				for _, tk := range ts {
					content := fmt.Sprintf("agent %d answers %s", i, tk.Turn)
					mu.Lock()
					inFlight[tk.Turn], holder[tk.Turn] = tk, a.token
					mu.Unlock()
					status, _, err := a.do("POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": content})
					if err != nil || status != 200 {
						return
					}
					mu.Lock()
					delete(inFlight, tk.Turn)
					acked[tk.Turn] = content
					n := len(acked)
					mu.Unlock()
					if n >= 300 {
						killOnce.Do(p.kill9)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(acked) < 300 {
		t.Fatalf("only %d responses before the agents stopped:\n%s", len(acked), p.stderr)
	}
	p2 := khStart(t, filepath.Dir(db), db)
	c := khNewClient(p2.url, agents[0].token)
	for turn, content := range acked {
		thread, step, _ := strings.Cut(turn, ".")
		var msgs []struct{ Content string }
		c.must(t, "GET", "/v1/threads/"+thread+"/messages?step="+step, nil, 200, &msgs)
		if len(msgs) != 1 || msgs[0].Content != content {
			t.Fatalf("acknowledged response %s lost after kill -9: %+v", turn, msgs)
		}
	}
	// A lease granted before the crash is still its holder's.
	for _, tk := range inFlight {
		khNewClient(p2.url, holder[tk.Turn]).must(t, "POST", "/v1/turns/"+tk.Turn+"/response", map[string]any{"claim": tk.Claim, "content": "after restart"}, 200, nil)
	}
	t.Logf("%d acknowledged responses survived kill -9; %d in-flight leases answered after restart", len(acked), len(inFlight))
}

func TestKhalaServeProcess(t *testing.T) {
	p, agents, db := khSetup(t, 1)
	home := filepath.Dir(db)
	// A second server on the same file: exit 1, with a hint.
	cmd := exec.Command(nerveBin(t), "khala", "serve", "--addr", "127.0.0.1:0", "--db", db)
	cmd.Env = append(os.Environ(), "NERVE_HOME="+home)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "locked by another process") || !strings.Contains(string(out), "hint:") {
		t.Fatalf("second serve: %v\n%s", err, out)
	}
	out, err = exec.Command(nerveBin(t), "khala", "serve", "--postgres", "postgres://x", "--db", db).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("--postgres with --db: %v\n%s", err, out)
	}
	// enroll-token while serving goes through the server.
	cmd = exec.Command(nerveBin(t), "khala", "enroll-token", "--db", db)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil || !strings.Contains(stderr.String(), "issued by the server") {
		t.Fatalf("enroll-token: %v %s", err, stderr.String())
	}
	// SIGTERM: graceful, exit 0, admin file removed, no token in the log.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("no exit 10s after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.stderr)
	}
	if _, err := os.Stat(db + ".admin"); !os.IsNotExist(err) {
		t.Fatalf("admin file left: %v", err)
	}
	log := p.stderr.String()
	if !strings.Contains(log, "shutting down") || strings.Contains(log, agents[0].token) || strings.Contains(log, "khala_enroll_") {
		t.Fatalf("log:\n%s", log)
	}
	// With no server, enroll-token writes the file itself.
	cmd = exec.Command(nerveBin(t), "khala", "enroll-token", "--db", db)
	stderr.Reset()
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil || !strings.Contains(stderr.String(), "written to") {
		t.Fatalf("enroll-token offline: %v %s", err, stderr.String())
	}
}
