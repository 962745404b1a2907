package adapter

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nerve-agents/nerve/internal/yamlfile"
)

func TestTypesAndBuiltin(t *testing.T) {
	want := []string{"claude", "codex", "gemini", "cursor", "hermes", "qwen", "opencode",
		"copilot", "pi", "crush", "kilo", "droid", "continue", "auggie", "exec"}
	if got := Types(); !slices.Equal(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
	Types()[0] = "mutated"
	if Types()[0] != "claude" {
		t.Fatal("Types() returned its own slice")
	}
	for _, n := range want {
		if !Builtin(n) {
			t.Errorf("Builtin(%q) = false", n)
		}
	}
	for _, n := range []string{"", "claude-fast", "cursor-agent", "Claude"} {
		if Builtin(n) {
			t.Errorf("Builtin(%q) = true", n)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		c       Spec
		wantErr string // empty: valid
	}{
		{"claude", Spec{}, ""},
		{"claude-fast", Spec{Type: "claude", Model: "claude-sonnet-4", Permissions: "full"}, ""},
		{"reviewer-bot", Spec{Type: "exec", Command: []string{"./bin/review", "--json"}}, ""},
		{"codex", Spec{Permissions: "read-only"}, ""},
		{"claude-fast", Spec{}, `adapter "claude-fast": no type`},
		{"bot", Spec{Type: "aider"}, `adapter "bot": unknown type "aider"`},
		{"exec", Spec{}, `adapter "exec": type exec needs a command`},
		{"x", Spec{Type: "exec", Command: []string{""}}, "needs a command"},
		{"claude", Spec{Permissions: "yolo"}, `adapter "claude": unknown permissions "yolo"`},
		{"claude", Spec{Command: []string{"x"}}, "command is only for type exec"},
		{"claude", Spec{Env: map[string]string{"A=B": "c"}}, "bad env variable name"},
		{"", Spec{Type: "claude"}, "empty name"},
	}
	for _, tt := range tests {
		err := Validate(tt.name, tt.c)
		_, newErr := New(tt.name, tt.c)
		if (err == nil) != (newErr == nil) {
			t.Errorf("%s: Validate and New disagree: %v vs %v", tt.name, err, newErr)
		}
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Validate(%q, %+v) = %v, want nil", tt.name, tt.c, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Validate(%q, %+v) = %v, want error containing %q", tt.name, tt.c, err, tt.wantErr)
		}
	}
}

func TestInspectDefaults(t *testing.T) {
	tests := []struct {
		name string
		c    Spec
		want Info
	}{
		{"claude", Spec{}, Info{Name: "claude", Type: "claude", Binary: "claude", Permissions: "workspace", Timeout: 30 * time.Minute}},
		{"cursor", Spec{}, Info{Name: "cursor", Type: "cursor", Binary: "cursor-agent", Permissions: "workspace", Timeout: 30 * time.Minute}},
		{"fast", Spec{Type: "gemini", Model: "m", Timeout: yamlfile.Duration(2 * time.Minute), Binary: "/opt/gemini"},
			Info{Name: "fast", Type: "gemini", Binary: "/opt/gemini", Permissions: "workspace", Timeout: 2 * time.Minute, Model: "m"}},
		{"bot", Spec{Type: "exec", Command: []string{"./review"}, Permissions: "full"},
			Info{Name: "bot", Type: "exec", Binary: "./review", Permissions: "full", Timeout: 10 * time.Minute}},
	}
	for _, tt := range tests {
		got, err := Inspect(tt.name, tt.c)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("Inspect(%q) = %+v, want %+v", tt.name, got, tt.want)
		}
		a, err := New(tt.name, tt.c)
		if err != nil {
			t.Fatal(err)
		}
		if a.Name() != tt.name || a.Type() != tt.want.Type {
			t.Errorf("New(%q): Name %q Type %q", tt.name, a.Name(), a.Type())
		}
	}
}

// TestArgv pins each CLI's command line per posture: these are the flags
// checked against the real CLIs' --help (testdata/FLAGS.md).
func TestArgv(t *testing.T) {
	q := []string{"Bash(nerve thread messages:*)", "Bash(nerve knowledge query:*)"}
	tests := []struct {
		name string
		c    Spec
		want []string // "<policy>" matches the gemini policy file path
	}{
		{"claude", Spec{}, append(append([]string{"-p", "--output-format", "stream-json", "--verbose",
			"--permission-mode", "acceptEdits", "--permission-prompts", "none", "--allowedTools"}, q...), "--", "PROMPT")},
		{"claude", Spec{Permissions: "read-only", Model: "opus", Args: []string{"--max-budget-usd", "1"}},
			append(append([]string{"-p", "--output-format", "stream-json", "--verbose", "--model", "opus", "--max-budget-usd", "1",
				"--permission-mode", "dontAsk", "--permission-prompts", "none", "--allowedTools", "Read", "Grep", "Glob"}, q...), "--", "PROMPT")},
		{"claude", Spec{Permissions: "full"}, []string{"-p", "--output-format", "stream-json", "--verbose",
			"--permission-mode", "bypassPermissions", "--", "PROMPT"}},
		{"codex", Spec{Model: "gpt-5.5"}, []string{"exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5",
			"-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false", "-c", "feedback.enabled=false", "-c", "features.in_app_updates=false",
			"--sandbox", "workspace-write", "-c", "allow_login_shell=false", "--", "PROMPT"}},
		{"codex", Spec{Permissions: "read-only"}, []string{"exec", "--json", "--skip-git-repo-check",
			"-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false", "-c", "feedback.enabled=false", "-c", "features.in_app_updates=false",
			"--sandbox", "read-only", "-c", "allow_login_shell=false", "--", "PROMPT"}},
		{"codex", Spec{Permissions: "full"}, []string{"exec", "--json", "--skip-git-repo-check",
			"-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false", "-c", "feedback.enabled=false", "-c", "features.in_app_updates=false",
			"--dangerously-bypass-approvals-and-sandbox", "-c", "allow_login_shell=false", "--", "PROMPT"}},
		{"gemini", Spec{Model: "gemini-3.8-flash"}, []string{"--prompt=PROMPT", "--output-format", "stream-json", "--skip-trust",
			"-m", "gemini-3.8-flash", "--approval-mode", "auto_edit", "--policy", "<policy>"}},
		{"gemini", Spec{Permissions: "read-only"}, []string{"--prompt=PROMPT", "--output-format", "stream-json", "--skip-trust",
			"--approval-mode", "plan", "--policy", "<policy>"}},
		{"gemini", Spec{Permissions: "full"}, []string{"--prompt=PROMPT", "--output-format", "stream-json", "--skip-trust", "--yolo"}},
		{"cursor", Spec{}, []string{"-p", "--output-format", "stream-json", "--trust", "--", "PROMPT"}},
		{"cursor", Spec{Permissions: "read-only", Model: "sonnet-4"}, []string{"-p", "--output-format", "stream-json", "--trust",
			"--model", "sonnet-4", "--mode", "ask", "--", "PROMPT"}},
		{"cursor", Spec{Permissions: "full"}, []string{"-p", "--output-format", "stream-json", "--trust", "--force", "--", "PROMPT"}},
		{"hermes", Spec{Model: "m"}, []string{"chat", "-q", "PROMPT", "-Q", "--model", "m"}},
		{"hermes", Spec{Permissions: "full"}, []string{"chat", "-q", "PROMPT", "-Q", "--yolo"}},
		{"qwen", Spec{Model: "qwen3-coder"}, []string{"--prompt=PROMPT", "--output-format", "stream-json", "-m", "qwen3-coder",
			"--approval-mode", "auto-edit", "--allowed-tools=Bash(nerve thread messages *)", "--allowed-tools=Bash(nerve knowledge query *)"}},
		{"qwen", Spec{Permissions: "read-only"}, []string{"--prompt=PROMPT", "--output-format", "stream-json",
			"--approval-mode", "plan", "--allowed-tools=Bash(nerve thread messages *)", "--allowed-tools=Bash(nerve knowledge query *)"}},
		{"qwen", Spec{Permissions: "full"}, []string{"--prompt=PROMPT", "--output-format", "stream-json", "--yolo"}},
		{"opencode", Spec{Model: "local/test"}, []string{"run", "--format", "json", "-m", "local/test", "--", "PROMPT"}},
		{"opencode", Spec{Permissions: "full"}, []string{"run", "--format", "json", "--auto", "--", "PROMPT"}},
		{"exec", Spec{Command: []string{"review", "--json"}, Args: []string{"--fast"}}, []string{"--json", "--fast"}},
		{"exec", Spec{Command: []string{"review", "--prompt={{prompt}}", "{{prompt}}"}}, []string{"--prompt=PROMPT", "PROMPT"}},
	}
	for _, tt := range tests {
		a, err := New(tt.name, tt.c)
		if err != nil {
			t.Fatal(err)
		}
		ca := a.(*cliAdapter)
		inv, err := ca.build(ca, Request{Prompt: "PROMPT"})
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(inv.args)
		for i, arg := range got {
			if i > 0 && got[i-1] == "--policy" {
				b, err := os.ReadFile(arg)
				if err != nil {
					t.Fatalf("gemini policy file: %v", err)
				}
				for _, want := range []string{`toolName = "run_shell_command"`, `"nerve thread messages"`, `"nerve knowledge query"`, `decision = "allow"`} {
					if !strings.Contains(string(b), want) {
						t.Errorf("gemini policy lacks %s:\n%s", want, b)
					}
				}
				got[i] = "<policy>"
			}
		}
		if inv.cleanup != nil {
			inv.cleanup()
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s %+v argv:\n got %q\nwant %q", tt.name, tt.c, got, tt.want)
		}
	}
}

func TestArgvPromptLikeAFlag(t *testing.T) {
	a, _ := New("hermes", Spec{})
	ca := a.(*cliAdapter)
	inv, _ := ca.build(ca, Request{Prompt: "- list the files"})
	if want := []string{"chat", "--query=- list the files", "-Q"}; !slices.Equal(inv.args, want) {
		t.Errorf("hermes argv %q, want %q", inv.args, want)
	}
}
