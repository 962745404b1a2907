package adapter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The captured failures, and the same streams as the CLIs print them for a
// 429 or an exhausted quota (CLIS.md), run through the real parsers: only
// the latter are rate limits.
func TestRateLimited(t *testing.T) {
	capture := func(name string, edits ...string) string {
		b, err := os.ReadFile(testdata(name))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer(edits...).Replace(string(b))
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lines := func(ls ...string) string {
		p := filepath.Join(t.TempDir(), "stream.jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, typ, file, exit, stderr string
		want                          bool
	}{
		{"claude 500", "claude", testdata("claude-api-error.jsonl"), "1", "", false},
		{"claude 429", "claude", capture("claude-api-error.jsonl", `"api_error_status":500`, `"api_error_status":429`,
			"API Error: 500 stub internal error.", "API Error: Rate limited."), "1", "", true},
		{"codex high demand", "codex", testdata("codex-failed.jsonl"), "1", "", false},
		{"codex 429", "codex", lines(`{"type":"thread.started","thread_id":"01a2"}`, `{"type":"turn.started"}`,
			`{"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}`,
			`{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}`), "1", "", true},
		{"gemini 500", "gemini", testdata("gemini-error.jsonl"), "244", "", false},
		{"gemini 429", "gemini", capture("gemini-error.jsonl", `\"code\":500`, `\"code\":429`, `stub internal error`,
			`Resource has been exhausted (e.g. check quota).`, `INTERNAL`, `RESOURCE_EXHAUSTED`), "173", "", true},
		{"gemini rate limited", "gemini", lines(`{"type":"init","session_id":"fc4c","model":"gemini-3.8-flash"}`,
			`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: rate limited]\nPlease wait and try again later."},"stats":{}}`),
			"173", "Attempt 1 failed with status 429. Retrying with backoff...\n", true},
		{"cursor usage limit", "cursor", testdata("cursor-error.jsonl"), "1", "Error: You've hit your usage limit\n", true},
		{"exec 429 on stderr", "exec", "", "1", "HTTP 429 Too Many Requests: slow down\n", true},
		{"exec quota", "exec", "", "1", "error: insufficient_quota: You exceeded your current quota\n", true},
		{"exec disk quota", "exec", "", "1", "write out.txt: disk quota exceeded\n", false},
		{"exec lint failure", "exec", "", "1", "review: lint failed at line 429x\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"FAKE_CLI_EXIT": tt.exit, "FAKE_CLI_STDERR": tt.stderr}
			if tt.file != "" {
				env["FAKE_CLI_FILE"] = tt.file
			}
			_, err := runFake(t, tt.typ, fake(t, tt.typ, "replay", env), Request{})
			if err == nil {
				t.Fatal("the turn succeeded")
			}
			if got := RateLimited(err); got != tt.want {
				t.Fatalf("RateLimited(%q) = %v, want %v", err, got, tt.want)
			}
		})
	}
	if RateLimited(nil) || RateLimited(ErrTimeout) {
		t.Fatal("no error, or a bare sentinel, is not a rate limit")
	}
}
