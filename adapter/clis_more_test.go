package adapter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nerve-agents/nerve/internal/usage"
)

// The seven adapters of CLIS-MORE.md, run on their captured streams
// (testdata/FLAGS.md says how each was captured) through the real runner.
func TestSuccessMoreCLIs(t *testing.T) {
	tests := []struct {
		name, typ, file, perm string
		want                  Result
	}{
		{"copilot", "copilot", "copilot-success.jsonl", "", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "copilot-test", SessionID: "da5bb8e6-18f2-4aa8-9a93-52cc2b9fa9be"}}},
		{"pi", "pi", "pi-success.jsonl", "", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "pi-test", InputTokens: usage.Int(200), OutputTokens: usage.Int(20), CacheReadTokens: usage.Int(0),
			CostUSD: usage.Float(0.00011999999999999999 + 0.00011999999999999999), SessionID: "01a233e9-954d-724b-af31-82c27f767837"}}},
		{"kilo", "kilo", "kilo-success.jsonl", "", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "gpt-test", InputTokens: usage.Int(200), OutputTokens: usage.Int(20), CacheReadTokens: usage.Int(0),
			SessionID: "ses_dcc187553ffeCXio6XrJECyGUw"}}},
		{"droid", "droid", "droid-success.jsonl", "", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "custom:Fake-0", InputTokens: usage.Int(400), OutputTokens: usage.Int(40), CacheReadTokens: usage.Int(0),
			SessionID: "9d474958-712e-4cfe-8ebc-e18924cf4d73", ToolErrors: 1}}},
		{"continue", "continue", "continue-success.jsonl", "", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{Model: "gpt-test"}}},
		// Transcribed from Auggie's source (it needs Augment's service)
		// and Crush's README (not installable here).
		{"auggie", "auggie", "auggie-success.jsonl", "", Result{Content: "Quoted: The code word is plum-4417.", Usage: usage.Usage{
			Model: "gpt-test", SessionID: "5f0c2a9e-7d1b-4c63-9a43-2b8d1e6f0a11"}}},
		{"crush", "crush", "crush-success.txt", "full", Result{Content: "Hello from crush.\n\nSecond paragraph.", Usage: usage.Usage{Model: "gpt-test"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake(t, tt.typ, "replay", map[string]string{"FAKE_CLI_FILE": testdata(tt.file), "FAKE_CLI_STDERR": "a warning on stderr\n"})
			c.Permissions = tt.perm
			if tt.want.Usage.Model == "gpt-test" {
				c.Model = "gpt-test" // not reported by the CLI: the configured model is recorded
			}
			res, err := runFake(t, tt.typ, c, Request{})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Content != tt.want.Content {
				t.Errorf("content %q, want %q", res.Content, tt.want.Content)
			}
			got := res.Usage
			got.DurationMS = 0
			if !got.Equal(tt.want.Usage) {
				t.Errorf("usage\n got %+v\nwant %+v", got, tt.want.Usage)
			}
		})
	}
}

func TestFailureMoreCLIs(t *testing.T) {
	tests := []struct {
		name, typ, file, exit, stderr, perm string
		wantReason                          string
		rateLimited                         bool
	}{
		{"copilot api error", "copilot", "copilot-api-error.jsonl", "1", "", "",
			"Failed to get response from the AI model; retried 5 times", false},
		{"copilot no result", "copilot", "", "0", "", "", "no result event; no output", false},
		{"pi api error, exit 0", "pi", "pi-api-error.jsonl", "0", "", "", "500 fake internal error", false},
		{"pi killed mid-stream", "pi", "pi-success.jsonl:6", "143", "", "", "no assistant message_end event", false},
		{"kilo api error", "kilo", "kilo-api-error.jsonl", "1", "", "", "APIError: fake internal error (api status 500)", false},
		{"droid rate limited", "droid", "droid-rate-limit.jsonl", "1", "", "", "429 fake rate limit; Exec failed", true},
		{"continue api error on stderr", "continue", "", "1", "continue-api-error.stderr", "", "500 fake internal error", false},
		{"continue killed: exit 0, no output", "continue", "", "0", "", "", "no result object", false},
		{"auggie error result", "auggie", "auggie-error.jsonl", "1", "", "", "result error_during_execution", false},
		{"auggie without a login", "auggie", "", "1", "auggie-noauth.stderr", "", "no result event; no output", false},
		{"crush fails", "crush", "", "1", "", "full", "command failed", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"FAKE_CLI_EXIT": tt.exit}
			if name, lines, ok := strings.Cut(tt.file, ":"); ok {
				env["FAKE_CLI_FILE"] = firstLines(t, name, lines)
			} else if tt.file != "" {
				env["FAKE_CLI_FILE"] = testdata(tt.file)
			}
			if tt.stderr != "" {
				b, err := os.ReadFile(testdata(tt.stderr))
				if err != nil {
					t.Fatal(err)
				}
				env["FAKE_CLI_STDERR"] = string(b)
			}
			c := fake(t, tt.typ, "replay", env)
			c.Permissions = tt.perm
			res, err := runFake(t, tt.typ, c, Request{})
			if err == nil {
				t.Fatalf("Run succeeded with %+v, want failure", res)
			}
			e := asError(t, err, tt.typ)
			if !strings.Contains(e.Reason, tt.wantReason) {
				t.Errorf("reason %q, want it to contain %q", e.Reason, tt.wantReason)
			}
			if RateLimited(err) != tt.rateLimited {
				t.Errorf("RateLimited(%q) = %v, want %v", err, !tt.rateLimited, tt.rateLimited)
			}
			if strings.Contains(e.Error(), "\n") {
				t.Errorf("message is not one line: %q", e.Error())
			}
		})
	}
}

// firstLines writes the first n lines of a testdata file to a temp file:
// a stream cut where a killed CLI stopped.
func firstLines(t *testing.T, name, n string) string {
	t.Helper()
	b, err := os.ReadFile(testdata(name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	k := 0
	for _, c := range n {
		k = k*10 + int(c-'0')
	}
	p := t.TempDir() + "/" + name
	if err := os.WriteFile(p, []byte(strings.Join(lines[:min(k, len(lines))], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Copilot's tokens are in the file --usage-output-file names, which it
// writes as it exits.
func TestCopilotUsageFile(t *testing.T) {
	p := &copilotParser{usageFile: testdata("copilot-usage.json")}
	b, err := os.ReadFile(testdata("copilot-success.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		p.line([]byte(l), false)
	}
	u := p.usage()
	want := usage.Usage{Model: "copilot-test", InputTokens: usage.Int(200), OutputTokens: usage.Int(20), CacheReadTokens: usage.Int(0),
		SessionID: "da5bb8e6-18f2-4aa8-9a93-52cc2b9fa9be"}
	if !u.Equal(want) {
		t.Fatalf("usage\n got %+v\nwant %+v", u, want)
	}
	if content, _, reason := p.finish(outcome{}); reason != "" || content != "Quoted: The code word is plum-4417." {
		t.Fatalf("finish: %q %q", content, reason)
	}
}

// Crush approves every tool itself: only the full posture is valid.
func TestCrushFullOnly(t *testing.T) {
	for _, perm := range []string{"", PermWorkspace, PermReadOnly} {
		err := Validate("crush", Spec{Permissions: perm})
		var se *SpecError
		if !errors.As(err, &se) || se.Field != "permissions" || !strings.Contains(err.Error(), "set permissions: full") {
			t.Errorf("permissions %q: %v, want a permissions error", perm, err)
		}
	}
	if err := Validate("crush", Spec{Permissions: PermFull}); err != nil {
		t.Fatal(err)
	}
}

// A prompt that looks like a flag (or, to pi, a file) reaches each CLI
// whole, as one argument or on stdin; one too long for a command line goes
// on stdin or in a file, or is refused with a clear error.
func TestPromptPassingMoreCLIs(t *testing.T) {
	long := strings.Repeat("x", maxArgBytes+1)
	tests := []struct {
		typ, prompt string
		want        string // "arg", "stdin", "file ARG" (the flag before the file) or "refused"
	}{
		{"copilot", "-v @x", "arg"}, {"copilot", long, "refused"},
		{"pi", "plain words", "arg"}, {"pi", "-v", "stdin"}, {"pi", "@notes.md", "stdin"}, {"pi", long, "stdin"},
		{"kilo", "-v", "arg"}, {"kilo", long, "refused"},
		{"droid", "-v", "arg"}, {"droid", long, "file -f"},
		{"continue", "-v", "arg"}, {"continue", long, "refused"},
		{"auggie", "-v", "arg"}, {"auggie", long, "file --instruction-file"},
		{"crush", "-v", "arg"}, {"crush", long, "refused"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%.12s", tt.typ, tt.prompt), func(t *testing.T) {
			dump := filepath.Join(t.TempDir(), "dump.json")
			c := fake(t, tt.typ, "replay", map[string]string{"FAKE_CLI_DUMP": dump, "FAKE_CLI_EXIT": "1"})
			c.Permissions = PermFull
			_, err := runFake(t, tt.typ, c, Request{Prompt: tt.prompt})
			if tt.want == "refused" {
				if err == nil || !strings.Contains(err.Error(), "longer than a command line takes") {
					t.Fatalf("want a clear refusal, got %v", err)
				}
				return
			}
			d := readDump(t, dump)
			switch kind, flag, _ := strings.Cut(tt.want, " "); kind {
			case "arg":
				if !slices.Contains(d.Args, tt.prompt) && !slices.Contains(d.Args, "--prompt="+tt.prompt) &&
					!slices.Contains(d.Args, "--instruction="+tt.prompt) {
					t.Fatalf("prompt %q is not one argument: %q", tt.prompt, d.Args)
				}
				if i := slices.Index(d.Args, tt.prompt); i > 0 && tt.typ != "pi" && d.Args[i-1] != "--" {
					t.Fatalf("prompt not after --: %q", d.Args)
				}
			case "stdin":
				if d.Stdin != tt.prompt || slices.Contains(d.Args, tt.prompt) {
					t.Fatalf("want the prompt on stdin only: stdin %d bytes, args %.200q", d.StdinBytes, d.Args)
				}
			case "file":
				i := slices.Index(d.Args, flag)
				if i < 0 || i+1 >= len(d.Args) {
					t.Fatalf("no %s FILE: %.300q", flag, d.Args)
				}
				if _, err := os.Stat(d.Args[i+1]); err == nil {
					t.Errorf("the prompt file %s outlived the turn", d.Args[i+1])
				}
			}
		})
	}
}
