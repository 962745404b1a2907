package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/fakemodel"
	"github.com/nerve-agents/nerve/internal/sandbox"
)

// The real agent CLIs, run as nerve adapters by a real daemon against a
// fake model endpoint on loopback (internal/fakemodel). Each test skips when
// its CLI is not on PATH, unless NERVE_REQUIRE_AGENT_CLIS=1 (.ci/run
// installs them from npm at the versions of adapter/testdata/FLAGS.md).

func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// requireCLI skips the test when the CLI is not installed, or fails it
// under NERVE_REQUIRE_AGENT_CLIS=1.
func requireCLI(t *testing.T, cli string) {
	t.Helper()
	name := fakemodel.Binary(cli)
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
// the posture perm ("": the default), in the sandbox's default posture
// (bwrap, network by allow-list: the model endpoint is reached through
// the daemon's proxy) where bubblewrap works.
func agentEnvFor(t *testing.T, cli string, m *fakemodel.Server, timeout, perm string) *env {
	e := newEnv(t)
	var model string
	var cliEnv map[string]string
	var err error
	if sandbox.Available() == nil {
		// The CLI's HOME inside is its state directory of its own.
		e.extra = append(e.extra, "NERVE_DAEMON_SANDBOX=bwrap")
		model, cliEnv, err = fakemodel.SetupHome(cli, filepath.Join(e.home, "sandbox", cli), m.URL)
	} else {
		t.Logf("bwrap does not work here: %s runs without a sandbox", cli)
		e.extra = append(e.extra, "NERVE_DAEMON_SANDBOX=none")
		model, cliEnv, err = fakemodel.Setup(cli, mkdir(t, e.home, "cli"), m.URL)
	}
	if err != nil {
		t.Fatal(err)
	}
	writeAgentConfig(e, cli, model, cliEnv, timeout, perm)
	return e
}

// writeAgentConfig writes e's nerve.yaml and quote workflow: a scribe,
// then cli as the agent with model, env, timeout and posture perm.
func writeAgentConfig(e *env, cli, model string, cliEnv map[string]string, timeout, perm string) {
	ad := map[string]any{"env": cliEnv, "timeout": timeout}
	if model != "" {
		ad["model"] = model
	}
	if perm != "" {
		ad["permissions"] = perm
	}
	adJSON, _ := json.Marshal(ad)
	e.write("nerve.yaml", fmt.Sprintf("adapters:\n  scribe: {type: exec, command: [/bin/echo, %q]}\n  %s: %s\n", theWord, cli, adJSON))
	e.write("workflows/quote.yaml", strings.Replace(quoteWorkflow, "AGENT", cli, 1))
}

// writeTool matches a write tool of nerve's as a CLI names it to the model
// (mcp__nerve__notify, mcp_nerve_workflow_run, a namespace's notify,
// copilot's nerve-notify, continue's bare notify).
var writeTool = regexp.MustCompile(`"name":"[a-z_-]*(notify|workflow_run)"`)

// TestE2EAgentCLIsQuoteThreadThroughMCP: under the default posture, and
// under read-only and full, with no shell tool used, each CLI's agent
// reads the thread's previous message through nerve's MCP server and
// quotes it.
func TestE2EAgentCLIsQuoteThreadThroughMCP(t *testing.T) {
	for _, cli := range fakemodel.CLIs {
		for _, perm := range []string{"", "read-only", "full"} {
			t.Run(strings.TrimSuffix(cli+"/"+perm, "/"), func(t *testing.T) {
				requireCLI(t, cli)
				if cli == "pi" && perm != "full" {
					t.Skip("pi has no MCP, and a shell only under full (adapter/pi.go)")
				}
				quoteThread(t, cli, perm)
			})
		}
	}
}

func quoteThread(t *testing.T, cli, perm string) {
	m := fakemodel.Start(t, "agent")
	e := agentEnvFor(t, cli, m, turnTimeout(cli, "", "120s"), perm)
	r := e.runLong("workflow", "run", filepath.Join(e.home, "workflows/quote.yaml"), "--json")
	out := decodeRun(t, r)
	if out.Status != "completed" || out.Result != "Quoted: "+theWord {
		t.Fatalf("want the thread completed with %q:\n%s\nmodel requests:\n%s", "Quoted: "+theWord, r, tail(m.Bodies(), 2))
	}
	for _, b := range m.Bodies() {
		// The word reached the model only inside thread_messages' answer.
		if strings.Contains(b, "plum-4417") && !toolResultRE.MatchString(b) {
			t.Errorf("the word reached the model outside a tool result:\n%.2000s", b)
		}
		if perm == "read-only" && writeTool.MatchString(b) {
			t.Errorf("read-only offered the model a write tool (%s)", writeTool.FindString(b))
		}
	}
	checkProxied(t, e, m)
	noProcessLeft(t, e)
}

// TestE2EAgentCLIsEndpointFailures: an endpoint that answers 500, 429 or
// never answers fails the turn with a clear error, and leaves no process;
// the daemon's back-off counts the 429 as a rate limit.
func TestE2EAgentCLIsEndpointFailures(t *testing.T) {
	for _, cli := range fakemodel.CLIs {
		for _, mode := range []string{"500", "429", "hang"} {
			t.Run(cli+"/"+mode, func(t *testing.T) {
				requireCLI(t, cli)
				t.Parallel() // each waits out a timeout or retries, doing nothing meanwhile
				endpointFailure(t, cli, mode)
			})
		}
	}
}

// checkProxied fails t unless e's turns ran in a sandbox whose proxy
// admitted m and forwarded its address inside (the daemon logs both).
func checkProxied(t *testing.T, e *env, m *fakemodel.Server) {
	t.Helper()
	if !slices.Contains(e.extra, "NERVE_DAEMON_SANDBOX=bwrap") {
		return
	}
	host := strings.TrimPrefix(m.URL, "http://")
	log, _ := os.ReadFile(filepath.Join(e.home, "nerve.log"))
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "sandbox network by allow-list") && strings.Contains(l, "--forward "+host) {
			return
		}
	}
	t.Errorf("no turn's network was the proxy forwarding %s:\n%s", host, log)
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
