package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/remote"
)

const approvalOnlyWF = `workflow: approval
binding: cloud
moderator: 'last = null ? {"role": "approver", "instruction": "approve"} : {"done": true}'
roles:
  approver: {human: true, prompt: Approve.}
`

// BenchmarkInbox runs `nerve inbox` (the binary, its daemon already up)
// against three remotes, each a real Khala with one turn waiting for the
// person: all up, then with one of them down (it accepts connections and
// never answers). It reports when the two live remotes' lines were printed
// and when the command ended (the dead one marked after --timeout).
//
//	go test ./cmd/nerve -run '^$' -bench Inbox -benchtime 20x
func BenchmarkInbox(b *testing.B) {
	home := b.TempDir()
	urls := map[string]string{}
	for _, name := range []string{"one", "two", "three"} {
		k := startKhala(b)
		urls[name] = k.url
		tok := strings.TrimSpace(runNerve(b, home, "khala", "user", "add", "alice", "--db", k.db))
		if err := remote.SavePersonToken(home, name, tok); err != nil {
			b.Fatal(err)
		}
		waitingTurn(b, k)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer dead.Close()
	go func() { // accept and hold every connection: a remote that hangs
		for {
			c, err := dead.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	config := func(names ...string) {
		var sb strings.Builder
		sb.WriteString("remotes:\n")
		for _, n := range names {
			u := urls[n]
			if n == "dead" {
				u = "http://" + dead.Addr().String()
			}
			fmt.Fprintf(&sb, "  %s: {url: %q}\n", n, u)
		}
		if err := os.WriteFile(filepath.Join(home, "nerve.yaml"), []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	remote.SavePersonToken(home, "dead", "khala_person_x")
	config("one", "two", "three")
	runNerve(b, home, "daemon", "start")
	defer runNerve(b, home, "daemon", "stop")

	b.Run("all-up", func(b *testing.B) {
		var total []time.Duration
		for b.Loop() {
			_, end := timedInbox(b, home, 3)
			total = append(total, end)
		}
		b.ReportMetric(pctMS(total, 50), "p50-ms")
		b.ReportMetric(pctMS(total, 90), "p90-ms")
	})
	b.Run("one-down", func(b *testing.B) {
		config("one", "two", "dead")
		defer config("one", "two", "three")
		var live, total []time.Duration
		for b.Loop() {
			l, end := timedInbox(b, home, 2)
			live, total = append(live, l), append(total, end)
		}
		b.ReportMetric(pctMS(live, 50), "p50-ms/live-lines")
		b.ReportMetric(pctMS(live, 90), "p90-ms/live-lines")
		b.ReportMetric(pctMS(total, 50), "p50-ms/marked")
	})
}

// timedInbox runs `nerve inbox --timeout 1s` and returns when the want'th
// waiting line was printed and when the command ended.
func timedInbox(b *testing.B, home string, want int) (time.Duration, time.Duration) {
	cmd := exec.Command(nerveBin(b), "inbox", "--timeout", "1s")
	cmd.Env = append(os.Environ(), "NERVE_HOME="+home, "NERVE_NO_AUTOSTART=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var live time.Duration
	rows := 0
	sc := bufio.NewScanner(out)
	var all []string
	for sc.Scan() {
		all = append(all, sc.Text())
		if strings.Contains(sc.Text(), "approval#thread-") && !strings.HasPrefix(sc.Text(), "answer with") {
			if rows++; rows == want {
				live = time.Since(t0)
			}
		}
	}
	if err := cmd.Wait(); err != nil || rows != want {
		b.Fatalf("inbox: %v, %d rows\n%s\n%s", err, rows, strings.Join(all, "\n"), stderr.String())
	}
	return live, time.Since(t0)
}

// waitingTurn starts a thread of a cloud workflow whose first turn waits
// for a person, through an enrolled agent's token.
func waitingTurn(b testing.TB, k *khalaServer) {
	var enrolled struct {
		Token string `json:"token"`
	}
	khalaCall(b, "POST", k.url+"/v1/agents", k.enrollToken(b, 1), map[string]any{"name": "a"}, &enrolled)
	req, _ := http.NewRequest("PUT", k.url+"/v1/workflows/approval", strings.NewReader(approvalOnlyWF))
	req.Header.Set("Authorization", "Bearer "+enrolled.Token)
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode >= 300 {
		b.Fatalf("push approval: %v %v", err, resp)
	}
	resp.Body.Close()
	khalaCall(b, "POST", k.url+"/v1/workflows/approval/threads", enrolled.Token, map[string]any{"input": map[string]any{}}, nil)
}

func khalaCall(b testing.TB, method, url, token string, in, out any) {
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b.Fatalf("%s %s: %s", method, url, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			b.Fatal(err)
		}
	}
}

func runNerve(b testing.TB, home string, args ...string) string {
	cmd := exec.Command(nerveBin(b), args...)
	cmd.Env = append(os.Environ(), "NERVE_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("nerve %v: %v", args, err)
	}
	return string(out)
}

func pctMS(ds []time.Duration, p int) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[(len(s)-1)*p/100]) / float64(time.Millisecond)
}
