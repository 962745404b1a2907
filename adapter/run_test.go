package adapter

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/procgroup"
	"github.com/nerve-agents/nerve/internal/usage"
)

// fake returns a config for adapter type typ whose binary is the fake CLI
// in the given mode; env adds FAKE_CLI_* settings.
func fake(t *testing.T, typ, mode string, env map[string]string) Spec {
	t.Helper()
	bin := map[string]string{"cursor": "cursor-agent", "exec": "review"}[typ]
	if bin == "" {
		bin = typ
	}
	// GORACE: a -race test binary otherwise sleeps a second at exit.
	c := Spec{Type: typ, Binary: fakeBinary(t, bin),
		Env: map[string]string{"FAKE_CLI_MODE": mode, "GORACE": "atexit_sleep_ms=0"}}
	for k, v := range env {
		c.Env[k] = v
	}
	if typ == "exec" {
		c.Command = []string{c.Binary}
	}
	return c
}

func testdata(name string) string {
	p, _ := filepath.Abs(filepath.Join("testdata", name))
	return p
}

func runFake(t *testing.T, name string, c Spec, req Request) (*Result, error) {
	t.Helper()
	a, err := New(name, c)
	if err != nil {
		t.Fatal(err)
	}
	if req.Workdir == "" {
		req.Workdir = t.TempDir()
	}
	if req.Prompt == "" {
		req.Prompt = "Say hello."
	}
	return a.Run(context.Background(), req)
}

// asError asserts err is an *Error naming the adapter.
func asError(t *testing.T, err error, adapter string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if e.Adapter != adapter || !strings.HasPrefix(e.Error(), "adapter "+adapter+": ") {
		t.Fatalf("error %q does not name adapter %q", e.Error(), adapter)
	}
	return e
}

func TestSuccess(t *testing.T) {
	denied := "Tool said: [{\"cache_control\":{\"type\":\"ephemeral\"},\"content\":\"Permission for this tool use was denied."
	tests := []struct {
		name, typ, file string
		want            Result
		prefix          bool // want.Content is a prefix
	}{
		// Captured from the real CLIs (testdata/FLAGS.md).
		{"claude", "claude", "claude-success.jsonl", Result{Content: "Hello from the stub model.", Usage: usage.Usage{
			Model: "claude-opus-5-5", InputTokens: usage.Int(120), OutputTokens: usage.Int(7), CacheReadTokens: usage.Int(0), CostUSD: usage.Float(0.00062),
			SessionID: "f2dd3452-0d71-490f-8557-390fe20fa42b"}}, false},
		{"claude tool denied", "claude", "claude-tool-denied.jsonl", Result{Content: denied, Usage: usage.Usage{
			Model: "claude-opus-5-5", InputTokens: usage.Int(240), OutputTokens: usage.Int(16), CacheReadTokens: usage.Int(0), CostUSD: usage.Float(0.0012799999999999999),
			SessionID: "4c9d5b94-ec5f-4716-b016-deda79217738", ToolErrors: 1}}, true},
		{"codex", "codex", "codex-success.jsonl", Result{Content: "Tool said: Chunk ID: 44c15a\nWall time: 0.0000 seconds\nProcess exited with code 2\n", Usage: usage.Usage{
			Model: "gpt-test", InputTokens: usage.Int(240), OutputTokens: usage.Int(14), CacheReadTokens: usage.Int(0),
			SessionID: "01a20940-eb26-79e0-b76f-79808d1516ae", ToolErrors: 1}}, true},
		{"gemini", "gemini", "gemini-success.jsonl", Result{Content: "Hello from the stub model.", Usage: usage.Usage{
			Model: "gemini-3.8-flash", InputTokens: usage.Int(130), OutputTokens: usage.Int(12), CacheReadTokens: usage.Int(0),
			SessionID: "45de690a-0827-473c-8cd3-9a1c4708526f"}}, false},
		{"gemini tool denied", "gemini", "gemini-tool-denied.jsonl", Result{Content: "Tool said: {\"id\":\"run_shell_command_1795451603159_0\"", Usage: usage.Usage{
			Model: "gemini-3.8-flash", InputTokens: usage.Int(240), OutputTokens: usage.Int(14), CacheReadTokens: usage.Int(0),
			SessionID: "2f4a78c1-081e-4f34-89df-b8208dcdc87d", ToolErrors: 1}}, true},
		{"qwen", "qwen", "qwen-success.jsonl", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "qwen-test", InputTokens: usage.Int(300), OutputTokens: usage.Int(30), CacheReadTokens: usage.Int(0),
			SessionID: "ad634a7a-ea84-4568-983a-6a797d290cdb"}}, false},
		{"opencode", "opencode", "opencode-success.jsonl", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "gpt-test", InputTokens: usage.Int(200), OutputTokens: usage.Int(20), CacheReadTokens: usage.Int(0),
			SessionID: "ses_decfb1561ffetFbg07t5Z74Myx"}}, false},
		// Transcribed from CLIS.md and Cursor's and Hermes' documentation.
		{"codex last message wins", "codex", "codex-multi.jsonl", Result{Content: "Here is the result:\n\n```json\n{\"verdict\": \"approve\"}\n```\n", Usage: usage.Usage{
			Model: "gpt-test", InputTokens: usage.Int(80), OutputTokens: usage.Int(7), CacheReadTokens: usage.Int(40),
			SessionID: "01a20870-a770-7f50-bd0b-8b47adb040d7", ToolErrors: 1}}, false},
		{"cursor", "cursor", "cursor-success.jsonl", Result{Content: "Hello from the stub model.", Usage: usage.Usage{
			Model: "Claude 4 Sonnet", SessionID: "c6b62c6f-7ead-4fd6-9922-e952131177ff", ToolErrors: 1}}, false},
		{"hermes", "hermes", "hermes-success.txt", Result{Content: "Hello from hermes.\n\nSecond paragraph.", Usage: usage.Usage{Model: "gpt-test"}}, false},
		{"exec", "exec", "hermes-success.txt", Result{Content: "Hello from hermes.\n\nSecond paragraph.", Usage: usage.Usage{Model: "gpt-test"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake(t, tt.typ, "replay", map[string]string{"FAKE_CLI_FILE": testdata(tt.file),
				"FAKE_CLI_STDERR": "a warning on stderr\n"})
			if tt.typ != "claude" && tt.typ != "gemini" && tt.typ != "cursor" && tt.typ != "qwen" {
				c.Model = "gpt-test" // not reported by the CLI: the configured model is recorded
			}
			var lines int
			res, err := runFake(t, tt.typ, c, Request{OnOutput: func([]byte) { lines++ }})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tt.prefix && strings.HasPrefix(res.Content, tt.want.Content) {
				// the rest is long and checked by its start
			} else if res.Content != tt.want.Content {
				t.Errorf("content %q, want %q", res.Content, tt.want.Content)
			}
			if res.Usage.DurationMS < 0 {
				t.Errorf("duration %d", res.Usage.DurationMS)
			}
			got := res.Usage
			got.DurationMS = 0
			if !got.Equal(tt.want.Usage) {
				t.Errorf("usage\n got %+v\nwant %+v", got, tt.want.Usage)
			}
			if res.Truncated {
				t.Error("truncated")
			}
			if lines == 0 {
				t.Error("OnOutput was never called")
			}
		})
	}
}

func TestFailure(t *testing.T) {
	tests := []struct {
		name, typ, file, exit, stderr string
		wantReason                    string
		wantUsage                     bool
	}{
		{"claude api error", "claude", "claude-api-error.jsonl", "1", "",
			"API Error: 500 stub internal error. This is a server-side issue", true},
		{"claude api error, stderr noise", "claude", "claude-api-error.jsonl", "1", "first\nsecond\n    at frame (x.js:1)\n}\n",
			"(api status 500)", true},
		{"claude error event, exit 0", "claude", "claude-api-error.jsonl", "0", "", "(api status 500)", true},
		{"codex turn failed", "codex", "codex-failed.jsonl", "1", "Reading additional input from stdin...\n",
			"We’re currently experiencing high demand", true},
		{"codex failed, exit 0", "codex", "codex-failed.jsonl", "0", "", "high demand", true},
		{"gemini error result", "gemini", "gemini-error.jsonl", "244", "Attempt 1 failed with status 500. Retrying with backoff...\n",
			`[API Error: {"error":{"code":500,"message":"stub internal error"`, true},
		{"gemini killed, exit 0, no result", "gemini", "gemini-sigterm.jsonl", "0", "", "no result event; last output: ", true},
		{"qwen api error", "qwen", "qwen-api-error.jsonl", "1", "Ripgrep not available. Falling back to built-in grep.\n",
			"[API Error: 500 probe]", true},
		{"opencode api error", "opencode", "opencode-api-error.jsonl", "1", "",
			"APIError: probe (api status 500)", true},
		{"opencode stops after a tool call", "opencode", "opencode-tool-step.jsonl", "0", "",
			"the last step ended with tool-calls", true},
		{"cursor exits 1 without result", "cursor", "cursor-error.jsonl", "1", "Error: You've hit your usage limit\n",
			"no result event", true},
		{"exec exit 1 with good output", "exec", "claude-success.jsonl", "1", "review: lint failed\n", "command failed", true},
		{"hermes exit 2", "hermes", "hermes-success.txt", "2", "Error: no provider configured\n", "command failed", true},
		{"malformed stream", "claude", "malformed.jsonl", "0", "", "no result event; last output: ", true},
		{"empty stream", "codex", "", "0", "", "no turn.completed event; no output", true},
		{"codex reconnecting then killed", "codex", "codex-multi-failed.jsonl", "1", "", "no turn.completed event; last error: stream disconnected", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"FAKE_CLI_EXIT": tt.exit, "FAKE_CLI_STDERR": tt.stderr}
			if tt.file != "" {
				env["FAKE_CLI_FILE"] = testdata(tt.file)
			}
			res, err := runFake(t, tt.typ, fake(t, tt.typ, "replay", env), Request{})
			if err == nil {
				t.Fatalf("Run succeeded with %+v, want failure", res)
			}
			e := asError(t, err, tt.typ)
			if !strings.Contains(e.Reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", e.Reason, tt.wantReason)
			}
			if want := "(exit status " + tt.exit + ")"; !strings.Contains(e.Error(), want) {
				t.Errorf("message %q lacks %q", e.Error(), want)
			}
			want := strings.TrimSpace(tt.stderr)
			if strings.Contains(tt.name, "noise") {
				want = "first | second" // stack frames and brackets are passed over
			}
			if want != "" && !strings.HasSuffix(e.Error(), "; stderr: "+want) {
				t.Errorf("message %q does not end with the stderr tail %q", e.Error(), want)
			}
			if tt.wantUsage && (e.Usage == nil || e.Usage.DurationMS < 0) {
				t.Errorf("usage %+v", e.Usage)
			}
			if strings.Contains(e.Error(), "\n") {
				t.Errorf("message is not one line: %q", e.Error())
			}
		})
	}
}

func TestMalformedShowsLastOutput(t *testing.T) {
	_, err := runFake(t, "claude", fake(t, "claude", "replay", map[string]string{"FAKE_CLI_FILE": testdata("malformed.jsonl")}), Request{})
	e := asError(t, err, "claude")
	if !strings.HasSuffix(e.Reason, "Error: something broke in the middle") {
		t.Errorf("reason %q does not end with the last output line", e.Reason)
	}
}

// Settled never runs between an adapter's fork and the end of its
// OnStart: the daemon's sweep for escaped processes would see the new
// leader before it is recorded, and take it for one.
func TestSettledWaitsForOnStart(t *testing.T) {
	a, err := New("claude", fake(t, "claude", "replay", map[string]string{"FAKE_CLI_FILE": testdata("claude-success.jsonl")}))
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Run(context.Background(), Request{Workdir: t.TempDir(), Prompt: "p",
			OnStart: func(int) { close(started); <-release }})
		done <- err
	}()
	<-started
	settled := make(chan struct{})
	go procgroup.Settled(func() { close(settled) })
	select {
	case <-settled:
		t.Fatal("Settled ran while an adapter's OnStart had not returned")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-settled
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
