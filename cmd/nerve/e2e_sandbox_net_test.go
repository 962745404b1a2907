package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Sandboxed turns' network (sandbox.network: allow-list, the default) and
// secrets, with an exec adapter's fake agent in a real daemon: the wall
// is bwrap's, the proxy the daemon's.

const oneTurnWorkflow = `workflow: net
moderator: 'last = null ? {"role": "agent"} : last.error ? {"fail": last.error.message} : last.role = "agent" ? {"role": "closer"} : {"done": true, "result": last.content}'
roles:
  agent: {adapter: agent, prompt: go}
  closer: {adapter: closer, prompt: go}
`

// sandboxedEnv is a home whose adapters agent and closer run script and
// closerScript with /bin/sh in bwrap, with more of nerve.yaml after them.
func sandboxedEnv(t *testing.T, script, closerScript, more string) *env {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	e := newEnv(t)
	e.extra = append(e.extra, "NERVE_DAEMON_SANDBOX=bwrap")
	e.write("nerve.yaml", fmt.Sprintf("adapters:\n  agent: {type: exec, command: [/bin/sh, -c, %q]}\n  closer: {type: exec, command: [/bin/sh, -c, %q]}\n%s",
		script, closerScript, more))
	e.write("workflows/net.yaml", oneTurnWorkflow)
	return e
}

// TestE2ESandboxRefusesAHostNotAllowed: curl through the proxy to a host
// not in sandbox.hosts is refused (403), curl around it finds no network,
// the refusal is in the daemon's log with its host and counted in
// /metrics, and the turn completes.
func TestE2ESandboxRefusesAHostNotAllowed(t *testing.T) {
	metrics := freeAddr(t)
	e := sandboxedEnv(t, `
echo "proxied: $(curl -sS -o /dev/null -w '%{http_connect}' --max-time 10 https://example.com/ 2>/dev/null)"
curl -sS --max-time 5 --noproxy '*' https://example.com/ >/dev/null 2>&1 && echo "direct: reached" || echo "direct: no network"
echo done`, "echo closed", fmt.Sprintf("daemon:\n  metrics_addr: %s\n", metrics))
	out := decodeRun(t, e.must(0, "workflow", "run", filepath.Join(e.home, "workflows/net.yaml"), "--json"))
	if out.Status != "completed" || out.Result != "closed" {
		t.Fatalf("want the thread completed: %+v", out)
	}
	msgs := e.must(0, "thread", "messages", out.Thread, "--step", "1", "--json")
	if !strings.Contains(msgs.stdout, `"content":"proxied: 403\ndirect: no network\ndone"`) {
		t.Errorf("the agent's curl was not refused as it should be:\n%s", msgs.stdout)
	}
	if m := scrapeMetrics(t, metrics); !strings.Contains(m, `nerve_sandbox_proxy_refused_total{host="example.com"} 1`) {
		t.Errorf("/metrics does not count the refusal:\n%s", grepLines(m, "refused"))
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log"))
	if !strings.Contains(string(log), "sandbox proxy refused a host") || !strings.Contains(string(log), "host=example.com:443") {
		t.Errorf("the refusal is not logged with its host:\n%s", grepLines(string(log), "proxy"))
	}
}

// TestE2ESandboxSecretsAreMasked: a secret without a host reaches the
// agent in its environment; one with a host does not, the proxy adds it
// to the agent's requests for that host; and what nerve keeps (the
// message, a failed turn's error and stderr, the log) shows *** for both.
func TestE2ESandboxSecretsAreMasked(t *testing.T) {
	const plain, hosted = "sk-plain-0123456789", "sk-hosted-9876543210"
	var mu sync.Mutex
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		fmt.Fprintf(w, "api saw key %s", r.Header.Get("X-Api-Key"))
	}))
	defer api.Close()
	host := strings.TrimPrefix(api.URL, "http://")
	e := sandboxedEnv(t, fmt.Sprintf(`
echo "plain: $NERVE_TEST_PLAIN"
echo "hosted in env: ${NERVE_TEST_HOSTED:-unset}"
echo "$(curl -sS --max-time 10 -H 'X-Api-Key: placeholder' %s/v1)"
echo "to stderr: $NERVE_TEST_PLAIN" >&2`, api.URL),
		`echo "failing with $NERVE_TEST_PLAIN" >&2; exit 1`,
		fmt.Sprintf("sandbox:\n  hosts: [%s]\n  secrets:\n    - {env: NERVE_TEST_PLAIN}\n    - {env: NERVE_TEST_HOSTED, host: %s, header: x-api-key}\n", host, host))
	e.extra = append(e.extra, "NERVE_TEST_PLAIN="+plain, "NERVE_TEST_HOSTED="+hosted)
	r := e.run("workflow", "run", filepath.Join(e.home, "workflows/net.yaml"), "--json")
	out := decodeRun(t, r)
	if out.Status != "failed" || !strings.Contains(out.Error, "failing with ***") {
		t.Fatalf("want the closer's failure, masked: %s", r)
	}
	msgs := e.must(0, "thread", "messages", out.Thread, "--json")
	want := "plain: ***\\nhosted in env: unset\\napi saw key ***"
	if !strings.Contains(msgs.stdout, want) {
		t.Errorf("the agent's message: want %q in\n%s", want, msgs.stdout)
	}
	mu.Lock()
	if len(got) != 1 || got[0] != hosted {
		t.Errorf("the API saw keys %q, want the hosted secret once", got)
	}
	mu.Unlock()
	log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log"))
	for _, s := range []string{plain, hosted} {
		for what, text := range map[string]string{"thread messages": msgs.stdout, "workflow run": r.stdout + r.stderr, "nerve.log": string(log)} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the secret %s:\n%s", what, s, text)
			}
		}
	}
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
