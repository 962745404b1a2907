package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nerve-agents/nerve/workflow"
)

// mcpWorkflow is a local workflow whose first two turns are played by the
// built-in example agent and whose third holds (writing its environment to
// turn.env) until the file release appears: while it holds, the test is
// inside a real turn of a real thread.
const mcpWorkflow = `workflow: mcpwf
description: two example turns, then one that holds
moderator: '$count(messages) = 0 ? {"role": "author", "instruction": "write"} : $count(messages) = 1 ? {"role": "reviewer", "instruction": "review"} : $count(messages) = 2 ? {"role": "holder", "instruction": "hold"} : {"done": true, "result": last.content}'
roles:
  author: {adapter: example, prompt: write}
  reviewer: {adapter: example, prompt: review}
  holder: {adapter: hold, prompt: hold}
`

// quickWorkflow is one example turn.
const quickWorkflow = `workflow: quick
description: one example turn
moderator: 'last = null ? {"role": "author", "instruction": "write"} : {"done": true, "result": last.content}'
roles:
  author: {adapter: example, prompt: write}
`

// holdScript records the turn's environment and waits for release.
const holdScript = `env | grep '^NERVE_' > "$NERVE_HOME/turn.env.tmp" && mv "$NERVE_HOME/turn.env.tmp" "$NERVE_HOME/turn.env"
i=0
while [ ! -f "$NERVE_HOME/release" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
echo held
`

// mcpEnv is a home with the MCP workflows, the hold adapter and a
// repository with a knowledge index.
func mcpEnv(t *testing.T) (*env, string) {
	e := newEnv(t)
	e.write("hold.sh", "#!/bin/sh\n"+holdScript)
	e.write("nerve.yaml", fmt.Sprintf("adapters:\n  hold: {type: exec, command: [%s/hold.sh], timeout: 90s}\n", e.home))
	e.write("workflows/mcpwf.yaml", mcpWorkflow)
	e.write("workflows/quick.yaml", quickWorkflow)
	repo := filepath.Join(e.home, "repo")
	e.write("repo/knowledge.yaml", "include: [\"*.go\"]\n")
	e.write("repo/lease.go", "package lease\n\n// RenewLease extends a claim's lease before it expires.\nfunc RenewLease() {}\n")
	e.must(0, "knowledge", "sync", "--repo", repo)
	return e, repo
}

// turnEnv reads what the holding turn was given.
func turnEnv(t *testing.T, e *env) map[string]string {
	t.Helper()
	path := filepath.Join(e.home, "turn.env")
	waitFor(t, "the holding turn to start", func() bool { _, err := os.Stat(path); return err == nil })
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[k] = v
		}
	}
	return out
}

// mcpSession starts `nerve mcp` with the home's environment plus vars and
// connects the SDK's own client to it.
func mcpSession(t testing.TB, home string, vars map[string]string) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(nerveBin(t), "mcp")
	cmd.Env = append(os.Environ(), "NERVE_HOME="+home, "NERVE_NO_AUTOSTART=1")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = home
	cmd.Stderr = &testWriter{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "nerve-test", Version: "1"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to nerve mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// testWriter sends the server's stderr to the test log.
type testWriter struct{ t testing.TB }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("nerve mcp: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// call calls a tool and returns its result; wantErr says whether the
// result must be a tool error.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any, wantErr bool) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error %v", tool, args, err)
	}
	if res.IsError != wantErr {
		t.Fatalf("%s %v: isError %v, want %v: %s", tool, args, res.IsError, wantErr, text(res))
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// decode decodes a result's structured content into out.
func decode(t *testing.T, res *sdk.CallToolResult, out any) {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
}

type mcpMessages struct {
	Thread   string             `json:"thread"`
	Messages []workflow.Message `json:"messages"`
}

// An MCP client drives `nerve mcp` through every tool inside a real turn
// (NERVE_THREAD and the snapshot of a thread the daemon runs), then
// outside one, and the server answers each bad input with a tool error and
// goes on.
func TestE2EMCPInAndOutsideATurn(t *testing.T) {
	e, repo := mcpEnv(t)
	e.unsandboxed("its agent hands its environment to the test through NERVE_HOME, for an MCP session of the turn's")
	ref := strings.TrimSpace(e.must(0, "workflow", "run", "mcpwf", "--detach", "--workdir", repo).stdout)
	turn := turnEnv(t, e)
	if turn["NERVE_THREAD"] != ref || turn["NERVE_THREAD_SNAPSHOT"] == "" || turn["NERVE_STEP"] != "3" {
		t.Fatalf("the turn's environment: %v (thread %s)", turn, ref)
	}
	cs := mcpSession(t, e.home, turn)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 40 || tool.InputSchema == nil {
			t.Errorf("tool %s lacks a description an agent can act on or an input schema: %+v", tool.Name, tool)
		}
	}
	if got := strings.Join(names, " "); got != "knowledge_query notify thread_messages thread_status workflow_list workflow_run" {
		t.Fatalf("tools: %s", got)
	}

	t.Run("thread_messages answers from the turn's snapshot as the CLI does", func(t *testing.T) {
		var got mcpMessages
		decode(t, call(t, cs, "thread_messages", nil, false), &got)
		if got.Thread != ref || len(got.Messages) != 2 || got.Messages[0].Role != "author" || got.Messages[1].Role != "reviewer" {
			t.Fatalf("thread_messages: %+v", got)
		}
		// The CLI, run with the same environment, prints the same messages.
		cli := exec.Command(nerveBin(t), "thread", "messages", "--json")
		cli.Env = append(os.Environ(), "NERVE_HOME="+e.home, "NERVE_NO_AUTOSTART=1",
			"NERVE_THREAD="+turn["NERVE_THREAD"], "NERVE_THREAD_SNAPSHOT="+turn["NERVE_THREAD_SNAPSHOT"])
		out, err := cli.Output()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for i, m := range got.Messages {
			var cm workflow.Message
			if i < len(lines) {
				json.Unmarshal([]byte(lines[i]), &cm)
			}
			mine, _ := json.Marshal(m)
			theirs, _ := json.Marshal(cm)
			if i >= len(lines) || string(mine) != string(theirs) {
				t.Fatalf("message %d: MCP %s, CLI %q", i, mine, lines)
			}
		}
		for _, c := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"last": 1}, "reviewer"},
			{map[string]any{"role": "author"}, "author"},
			{map[string]any{"step": 2}, "reviewer"},
			{map[string]any{"since": "1h", "last": 2}, "author reviewer"},
			{map[string]any{"since": time.Now().Add(time.Hour).Format(time.RFC3339)}, ""},
		} {
			var got mcpMessages
			decode(t, call(t, cs, "thread_messages", c.args, false), &got)
			var roles []string
			for _, m := range got.Messages {
				roles = append(roles, m.Role)
			}
			if strings.Join(roles, " ") != c.want {
				t.Errorf("thread_messages %v: roles %v, want %q", c.args, roles, c.want)
			}
		}
		// It is the snapshot that answers: a doctored copy is believed.
		raw, _ := os.ReadFile(turn["NERVE_THREAD_SNAPSHOT"])
		fake := filepath.Join(e.home, "fake.jsonl")
		os.WriteFile(fake, []byte(strings.Replace(string(raw), "I changed the retry loop", "SNAPSHOT MARKER", 1)), 0o600)
		vars := map[string]string{"NERVE_THREAD": ref, "NERVE_THREAD_SNAPSHOT": fake}
		if got := text(call(t, mcpSession(t, e.home, vars), "thread_messages", map[string]any{"role": "author"}, false)); !strings.Contains(got, "SNAPSHOT MARKER") {
			t.Fatalf("thread_messages did not answer from the snapshot: %s", got)
		}
	})

	t.Run("thread_status, notify, knowledge_query, workflow_list and workflow_run", func(t *testing.T) {
		var st struct {
			Thread, Status string
			Step           int
		}
		decode(t, call(t, cs, "thread_status", nil, false), &st)
		if st.Thread != ref || st.Status != "running" || st.Step != 3 {
			t.Fatalf("thread_status: %+v", st)
		}
		call(t, cs, "notify", map[string]any{"level": "warning", "message": "the disk is almost full"}, false)
		if logs := e.must(0, "workflow", "logs", ref).stdout; !strings.Contains(logs, "step 3  holder  notify warning: the disk is almost full") {
			t.Fatalf("workflow logs lack the notice:\n%s", logs)
		}
		var hits struct {
			Hits []struct {
				Path string `json:"path"`
				Text string `json:"text"`
			} `json:"hits"`
		}
		decode(t, call(t, cs, "knowledge_query", map[string]any{"query": "renew lease", "limit": 3}, false), &hits)
		if len(hits.Hits) == 0 || hits.Hits[0].Path != "lease.go" || !strings.Contains(hits.Hits[0].Text, "RenewLease") {
			t.Fatalf("knowledge_query in the turn's workdir: %+v", hits)
		}
		var list struct {
			Workflows []struct{ Ref, Binding, Description string } `json:"workflows"`
		}
		decode(t, call(t, cs, "workflow_list", nil, false), &list)
		if len(list.Workflows) != 2 || list.Workflows[0].Ref != "mcpwf" || list.Workflows[1].Ref != "quick" || list.Workflows[1].Description != "one example turn" {
			t.Fatalf("workflow_list: %+v", list)
		}
		var run struct {
			Thread, Status string
			Result         any
		}
		decode(t, call(t, cs, "workflow_run", map[string]any{"workflow": "quick", "wait": true, "timeout_seconds": 60}, false), &run)
		if run.Thread != "quick#thread-2" || run.Status != "completed" || !strings.Contains(fmt.Sprint(run.Result), "retry loop") {
			t.Fatalf("workflow_run with wait: %+v", run)
		}
		decode(t, call(t, cs, "workflow_run", map[string]any{"workflow": "quick"}, false), &run)
		if run.Thread != "quick#thread-3" || run.Status != "running" {
			t.Fatalf("workflow_run: %+v", run)
		}
	})

	t.Run("bad inputs are tool errors and the server goes on", func(t *testing.T) {
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			// Inside a turn, any thread but its own and its children is
			// out of reach, one that does not exist too.
			{"thread_messages", map[string]any{"thread": "mcpwf#thread-99"}, "refused: a turn reads only its own thread (mcpwf#thread-1) and the children it started, not thread-99"},
			{"thread_status", map[string]any{"thread": "mcpwf#thread-99"}, "refused: a turn reads only its own thread (mcpwf#thread-1)"},
			{"thread_messages", map[string]any{"thread": "quick#thread-1"}, "thread-1 is a thread of mcpwf, not of quick"},
			{"thread_messages", map[string]any{"thread": "mcpwf"}, "mcpwf names no thread"},
			{"thread_messages", map[string]any{"last": -1}, `Argument "last" must be at least 0.`},
			{"thread_messages", map[string]any{"since": "yesterday"}, `since "yesterday" is neither a duration nor an RFC 3339 time`},
			{"thread_messages", map[string]any{"last": "three"}, `Argument "last" must be an integer, not a string.`},
			{"thread_messages", map[string]any{"step": 1.5}, `Argument "step" must be an integer, not a number.`},
			{"thread_messages", map[string]any{"thread": 7}, `Argument "thread" must be a string, not an integer.`},
			{"thread_messages", map[string]any{"lats": 1}, `Unknown argument "lats"`},
			{"knowledge_query", map[string]any{"query": ""}, `Argument "query" must not be empty.`},
			{"knowledge_query", map[string]any{"query": "   "}, "the query is empty"},
			{"knowledge_query", map[string]any{}, `Missing argument "query".`},
			{"notify", map[string]any{"level": "urgent", "message": "x"}, `Argument "level" must be one of info, warning, blocking, not urgent.`},
			{"notify", map[string]any{"level": "info", "message": ""}, `Argument "message" must not be empty.`},
			{"workflow_run", map[string]any{"workflow": "nope"}, "nope"},
			{"workflow_run", map[string]any{"workflow": "quick", "input": "x"}, `Argument "input" must be an object, not a string.`},
		} {
			res := call(t, cs, c.tool, c.args, true)
			if got := text(res); !strings.Contains(got, c.want) || strings.Count(got, "\n") > 0 {
				t.Errorf("%s %v: %q, want one line with %q", c.tool, c.args, got, c.want)
			}
		}
		if err := cs.Ping(context.Background(), nil); err != nil {
			t.Fatalf("the server is gone after bad inputs: %v", err)
		}
	})

	e.write("release", "")
	e.must(0, "workflow", "logs", ref, "-f")

	t.Run("outside a turn", func(t *testing.T) {
		out := mcpSession(t, e.home, nil)
		if got := text(call(t, out, "thread_messages", nil, true)); !strings.Contains(got, "NERVE_THREAD is not set") {
			t.Fatalf("thread_messages without a thread: %s", got)
		}
		var got mcpMessages
		decode(t, call(t, out, "thread_messages", map[string]any{"thread": ref, "last": 1}, false), &got)
		if len(got.Messages) != 1 || got.Messages[0].Role != "holder" || strings.TrimSpace(got.Messages[0].Content) != "held" {
			t.Fatalf("thread_messages from the daemon: %+v", got)
		}
		var st struct {
			Status string
			Result any
		}
		decode(t, call(t, out, "thread_status", map[string]any{"thread": ref}, false), &st)
		if st.Status != "completed" || strings.TrimSpace(fmt.Sprint(st.Result)) != "held" {
			t.Fatalf("thread_status of the ended thread: %+v", st)
		}
		if got := text(call(t, out, "notify", map[string]any{"thread": ref, "level": "info", "message": "late"}, true)); !strings.Contains(got, "already ended") {
			t.Fatalf("notify on an ended thread: %s", got)
		}
		if got := text(call(t, out, "notify", map[string]any{"level": "info", "message": "x"}, true)); !strings.Contains(got, "NERVE_THREAD is not set") {
			t.Fatalf("notify without a thread: %s", got)
		}
	})
}
