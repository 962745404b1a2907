package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The real agent CLIs, run as nerve adapters by a real daemon against a
// fake model endpoint on loopback (fakemodel_test.go). Each test skips when
// its CLI is not on PATH, unless NERVE_REQUIRE_AGENT_CLIS=1 (.ci/run
// installs them from npm at the versions of adapter/testdata/FLAGS.md).

// agentCLI is one CLI: how to point it at the fake endpoint, offline and
// isolated from the machine's own configuration.
type agentCLI struct {
	name string // adapter type and binary
	// adapter returns the nerve.yaml adapter entry (its env, model, …) for
	// an endpoint at url, writing what the CLI needs under dir.
	adapter func(t *testing.T, dir, url string) map[string]any
}

var agentCLIs = []agentCLI{
	{"claude", func(t *testing.T, dir, url string) map[string]any {
		return map[string]any{"env": map[string]string{
			"HOME":                    mkdir(t, dir, "home"),
			"ANTHROPIC_BASE_URL":      url,
			"ANTHROPIC_API_KEY":       "fake-key",
			"CLAUDE_CODE_MAX_RETRIES": "0",
		}}
	}},
	{"codex", func(t *testing.T, dir, url string) map[string]any {
		home := mkdir(t, dir, "codex")
		writeFile(t, filepath.Join(home, "config.toml"), fmt.Sprintf(`model = "gpt-test"
model_provider = "local"
check_for_update_on_startup = false
[model_providers.local]
name = "local"
base_url = "%s/v1"
env_key = "LOCAL_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
[analytics]
enabled = false
[feedback]
enabled = false
[features]
plugins = false
remote_plugin = false
apps = false
api_key_model_discovery = false
in_app_updates = false
`, url))
		return map[string]any{"env": map[string]string{"CODEX_HOME": home, "HOME": mkdir(t, dir, "home"), "LOCAL_API_KEY": "fake-key"}}
	}},
	{"gemini", func(t *testing.T, dir, url string) map[string]any {
		home := mkdir(t, dir, "home")
		writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},`+
			`"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},`+
			`"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false,"maxAttempts":1}}`)
		// A model of its own skips the "auto" router's side call.
		return map[string]any{"model": "gemini-test", "env": map[string]string{
			"HOME": home, "GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "fake-key"}}
	}},
	{"qwen", func(t *testing.T, dir, url string) map[string]any {
		home := mkdir(t, dir, "home")
		writeFile(t, filepath.Join(home, ".qwen", "settings.json"), `{"model":{"generationConfig":{"maxRetries":0}},"general":{"enableAutoUpdate":false}}`)
		return map[string]any{"env": map[string]string{
			"HOME": home, "OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "fake-key", "OPENAI_MODEL": "qwen-test"}}
	}},
	{"opencode", func(t *testing.T, dir, url string) map[string]any {
		home := mkdir(t, dir, "home")
		cfg := filepath.Join(dir, "opencode.json")
		writeFile(t, cfg, fmt.Sprintf(`{"provider":{"local":{"npm":"@ai-sdk/openai-compatible","name":"local",`+
			`"options":{"baseURL":"%s/v1","apiKey":"fake-key"},"models":{"test":{"name":"test"}}}}}`, url))
		return map[string]any{"model": "local/test", "env": map[string]string{"HOME": home, "OPENCODE_CONFIG": cfg}}
	}},
}

func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// requireCLI skips the test when the CLI is not installed, or fails it
// under NERVE_REQUIRE_AGENT_CLIS=1.
func requireCLI(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("NERVE_REQUIRE_AGENT_CLIS") == "1" {
			t.Fatalf("%s is not installed (NERVE_REQUIRE_AGENT_CLIS=1): %v", name, err)
		}
		t.Skipf("%s is not installed", name)
	}
}

// theWord is the previous message of the thread: the agent can only know
// it by reading the thread through nerve's MCP server.
const theWord = "The code word is plum-4417."

const quoteWorkflow = `workflow: quote
description: a scribe writes, then an agent quotes it through nerve's MCP tools
moderator: 'last = null ? {"role": "scribe"} : last.role = "scribe" ? {"role": "agent", "instruction": "Quote the previous message of this thread."} : last.error ? {"fail": last.error.message} : {"done": true, "result": last.content}'
roles:
  scribe: {adapter: scribe, prompt: Write the code word.}
  agent: {adapter: AGENT, prompt: Read the thread with your nerve tools.}
`

// agentEnvFor is a nerve home whose "agent" role runs cli against m under
// the posture perm ("": the default).
func agentEnvFor(t *testing.T, cli agentCLI, m *fakeModel, timeout, perm string) *env {
	e := newEnv(t)
	ad := cli.adapter(t, mkdir(t, e.home, "cli"), m.srv.URL)
	ad["timeout"] = timeout
	if perm != "" {
		ad["permissions"] = perm
	}
	adJSON, _ := json.Marshal(ad)
	e.write("nerve.yaml", fmt.Sprintf("adapters:\n  scribe: {type: exec, command: [/bin/echo, %q]}\n  %s: %s\n", theWord, cli.name, adJSON))
	e.write("workflows/quote.yaml", strings.Replace(quoteWorkflow, "AGENT", cli.name, 1))
	return e
}

// writeTool matches a write tool of nerve's as a CLI names it to the model
// (mcp__nerve__notify, mcp_nerve_workflow_run, a namespace's notify).
var writeTool = regexp.MustCompile(`"name":"[a-z_]*(notify|workflow_run)"`)

// TestE2EAgentCLIsQuoteThreadThroughMCP: under the default posture and
// under read-only, with no shell tool used, each CLI's agent reads the
// thread's previous message through nerve's MCP server and quotes it.
func TestE2EAgentCLIsQuoteThreadThroughMCP(t *testing.T) {
	for _, cli := range agentCLIs {
		for _, perm := range []string{"", "read-only"} {
			t.Run(strings.TrimSuffix(cli.name+"/"+perm, "/"), func(t *testing.T) {
				requireCLI(t, cli.name)
				quoteThread(t, cli, perm)
			})
		}
	}
}

func quoteThread(t *testing.T, cli agentCLI, perm string) {
	m := startFakeModel(t, "agent")
	e := agentEnvFor(t, cli, m, "120s", perm)
	r := e.run("workflow", "run", filepath.Join(e.home, "workflows/quote.yaml"), "--json")
	out := decodeRun(t, r)
	if out.Status != "completed" || out.Result != "Quoted: "+theWord {
		t.Fatalf("want the thread completed with %q:\n%s\nmodel requests:\n%s", "Quoted: "+theWord, r, tail(m.bodies(), 2))
	}
	for _, b := range m.bodies() {
		// The word reached the model only inside thread_messages' answer.
		if strings.Contains(b, "plum-4417") && !strings.Contains(b, `\"thread\":`) {
			t.Errorf("the word reached the model outside a tool result:\n%.2000s", b)
		}
		if perm == "read-only" && writeTool.MatchString(b) {
			t.Errorf("read-only offered the model a write tool (%s)", writeTool.FindString(b))
		}
	}
	noProcessLeft(t, e)
}

// TestE2EAgentCLIsEndpointFailures: an endpoint that answers 500 or never
// answers fails the turn with a clear error, and leaves no process.
func TestE2EAgentCLIsEndpointFailures(t *testing.T) {
	for _, cli := range agentCLIs {
		for _, mode := range []string{"500", "hang"} {
			t.Run(cli.name+"/"+mode, func(t *testing.T) {
				requireCLI(t, cli.name)
				m := startFakeModel(t, mode)
				e := agentEnvFor(t, cli, m, "8s", "")
				start := time.Now()
				r := e.run("workflow", "run", filepath.Join(e.home, "workflows/quote.yaml"), "--json")
				out := decodeRun(t, r)
				want := "adapter " + cli.name + ": "
				if mode == "hang" {
					want += "timed out after 8s"
				}
				if r.code != 1 || out.Status != "failed" || !strings.Contains(out.Error, want) {
					t.Fatalf("want the thread failed with %q:\n%s", want, r)
				}
				t.Logf("%s in %s: %s", mode, time.Since(start).Round(time.Millisecond), out.Error)
				noProcessLeft(t, e)
			})
		}
	}
}

func tail(ss []string, n int) string {
	if len(ss) > n {
		ss = ss[len(ss)-n:]
	}
	for i, s := range ss {
		if len(s) > 3000 {
			ss[i] = s[:1500] + " … " + s[len(s)-1500:]
		}
	}
	return strings.Join(ss, "\n")
}

// noProcessLeft waits until no process but the daemon has e's NERVE_HOME
// in its environment: the CLI, its children and nerve's MCP server are gone.
func noProcessLeft(t *testing.T, e *env) {
	t.Helper()
	marker := []byte("NERVE_HOME=" + e.home + "\x00")
	var left []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		left = left[:0]
		daemon := e.daemonPID()
		entries, _ := os.ReadDir("/proc")
		for _, d := range entries {
			pid, err := strconv.Atoi(d.Name())
			if err != nil || pid == os.Getpid() || pid == daemon {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
			if err != nil || !bytes.Contains(b, marker) {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes left after the turn:\n%s", strings.Join(left, "\n"))
	}
}
