package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testMCP = &MCPServer{Command: "/opt/nerve", Args: []string{"mcp"},
	Env: []string{"NERVE_THREAD=w#thread-1", "NERVE_THREAD_SNAPSHOT=/s/t.jsonl"}}

// buildWith builds typ's invocation under perm with nerve's MCP server.
func buildWith(t *testing.T, typ, perm string, c Spec) *invocation {
	t.Helper()
	c.Permissions = perm
	a, err := New(typ, c)
	if err != nil {
		t.Fatal(err)
	}
	ca := a.(*cliAdapter)
	inv, err := ca.build(ca, Request{Prompt: "PROMPT", MCP: testMCP})
	if err != nil {
		t.Fatal(err)
	}
	if inv.cleanup != nil {
		t.Cleanup(inv.cleanup)
	}
	return inv
}

func argAfter(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func TestClaudeMCP(t *testing.T) {
	for _, tt := range []struct {
		perm       string
		args       string
		allowed    []string
		notAllowed []string
	}{
		{"workspace", `["mcp"]`, []string{"mcp__nerve__thread_messages", "mcp__nerve__notify", "mcp__nerve__workflow_run"}, nil},
		{"read-only", `["mcp","--read-only"]`, []string{"mcp__nerve__thread_messages", "mcp__nerve__knowledge_query"}, []string{"mcp__nerve__notify", "mcp__nerve__workflow_run"}},
		{"full", `["mcp"]`, nil, nil},
	} {
		inv := buildWith(t, "claude", tt.perm, Spec{})
		cfg := argAfter(inv.args, "--mcp-config")
		want := `{"mcpServers":{"nerve":{"args":` + tt.args + `,"command":"/opt/nerve","env":{"NERVE_THREAD":"w#thread-1","NERVE_THREAD_SNAPSHOT":"/s/t.jsonl"},"type":"stdio"}}}`
		if cfg != want {
			t.Errorf("%s --mcp-config\n got %s\nwant %s", tt.perm, cfg, want)
		}
		if !slices.Contains(inv.args, "--strict-mcp-config") {
			t.Errorf("%s: no --strict-mcp-config", tt.perm)
		}
		if inv.args[len(inv.args)-2] != "--" {
			t.Errorf("%s: the prompt is not last after --: %q", tt.perm, inv.args)
		}
		for _, tool := range tt.allowed {
			if !slices.Contains(inv.args, tool) {
				t.Errorf("%s: %s not allowed: %q", tt.perm, tool, inv.args)
			}
		}
		for _, tool := range tt.notAllowed {
			if slices.Contains(inv.args, tool) {
				t.Errorf("%s: %s allowed", tt.perm, tool)
			}
		}
	}
}

func TestCodexMCP(t *testing.T) {
	for perm, args := range map[string]string{"workspace": `["mcp"]`, "read-only": `["mcp", "--read-only"]`, "full": `["mcp"]`} {
		inv := buildWith(t, "codex", perm, Spec{})
		want := `mcp_servers.nerve={command="/opt/nerve", args=` + args +
			`, env={NERVE_THREAD="w#thread-1", NERVE_THREAD_SNAPSHOT="/s/t.jsonl"}, default_tools_approval_mode="approve"}`
		if !slices.Contains(inv.args, want) {
			t.Errorf("%s: argv lacks %s:\n%q", perm, want, inv.args)
		}
	}
}

func TestGeminiMCP(t *testing.T) {
	user := t.TempDir()
	os.MkdirAll(filepath.Join(user, ".gemini", "tmp"), 0o700)
	os.WriteFile(filepath.Join(user, ".gemini", "settings.json"), []byte(`{
  // the user's own
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "mcpServers": {"theirs": {"command": "x"}} /* kept */
}`), 0o600)
	os.WriteFile(filepath.Join(user, ".gemini", "oauth_creds.json"), []byte(`{}`), 0o600)
	for _, perm := range []string{"workspace", "read-only", "full"} {
		inv := buildWith(t, "gemini", perm, Spec{Env: map[string]string{"HOME": user}})
		home := envValue(inv.env, "GEMINI_CLI_HOME")
		if home == "" || strings.HasPrefix(home, user) {
			t.Fatalf("%s: GEMINI_CLI_HOME %q", perm, home)
		}
		b, err := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Security   map[string]any `json:"security"`
			MCPServers map[string]struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		wantArgs := []string{"mcp"}
		if perm == "read-only" {
			wantArgs = append(wantArgs, "--read-only")
		}
		if n := s.MCPServers["nerve"]; n.Command != "/opt/nerve" || !slices.Equal(n.Args, wantArgs) || s.MCPServers["theirs"].Command != "x" || s.Security == nil {
			t.Errorf("%s: turn settings %s", perm, b)
		}
		if l, err := os.Readlink(filepath.Join(home, ".gemini", "oauth_creds.json")); err != nil || l != filepath.Join(user, ".gemini", "oauth_creds.json") {
			t.Errorf("%s: credentials not linked: %q %v", perm, l, err)
		}
		policy := argAfter(inv.args, "--policy")
		if perm == "full" {
			if policy != "" || !slices.Contains(inv.args, "--yolo") {
				t.Errorf("full argv %q", inv.args)
			}
			continue
		}
		p, err := os.ReadFile(policy)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range MCPReadTools {
			if !strings.Contains(string(p), "mcpName = \"nerve\"\ntoolName = \""+tool+"\"\ndecision = \"allow\"") {
				t.Errorf("%s policy does not allow %s:\n%s", perm, tool, p)
			}
		}
		if got := strings.Contains(string(p), `toolName = "notify"`); got != (perm == "workspace") {
			t.Errorf("%s policy allows notify: %v\n%s", perm, got, p)
		}
	}
	a, _ := New("gemini", Spec{Env: map[string]string{"GEMINI_CLI_HOME": user}})
	ca := a.(*cliAdapter)
	if _, err := ca.build(ca, Request{Prompt: "P", MCP: testMCP}); err == nil || !strings.Contains(err.Error(), "GEMINI_CLI_HOME") {
		t.Errorf("an adapter env with GEMINI_CLI_HOME: %v", err)
	}
	// The user's own files are untouched.
	b, _ := os.ReadFile(filepath.Join(user, ".gemini", "settings.json"))
	if strings.Contains(string(b), "/opt/nerve") {
		t.Errorf("the user's settings were changed: %s", b)
	}
}

func TestQwenMCP(t *testing.T) {
	for perm, args := range map[string]string{"workspace": `["mcp"]`, "read-only": `["mcp","--read-only"]`, "full": `["mcp"]`} {
		inv := buildWith(t, "qwen", perm, Spec{})
		want := `{"mcpServers":{"nerve":{"args":` + args + `,"command":"/opt/nerve","env":{"NERVE_THREAD":"w#thread-1","NERVE_THREAD_SNAPSHOT":"/s/t.jsonl"}}}}`
		if got := argAfter(inv.args, "--mcp-config"); got != want {
			t.Errorf("%s --mcp-config\n got %s\nwant %s", perm, got, want)
		}
		notify := slices.Contains(inv.args, "--allowed-tools=mcp__nerve__notify")
		if notify != (perm == "workspace") || (perm != "full") != slices.Contains(inv.args, "--allowed-tools=mcp__nerve__thread_messages") {
			t.Errorf("%s allowed tools: %q", perm, inv.args)
		}
		if envValue(inv.env, "QWEN_CODE_LEGACY_MCP_BLOCKING") != "1" {
			t.Errorf("%s: qwen does not wait for nerve's server", perm)
		}
	}
}

func TestOpencodeConfig(t *testing.T) {
	for _, perm := range []string{"workspace", "read-only", "full"} {
		inv := buildWith(t, "opencode", perm, Spec{})
		var cfg struct {
			Permission map[string]any `json:"permission"`
			MCP        map[string]struct {
				Type        string            `json:"type"`
				Command     []string          `json:"command"`
				Environment map[string]string `json:"environment"`
			} `json:"mcp"`
		}
		if err := json.Unmarshal([]byte(envValue(inv.env, "OPENCODE_CONFIG_CONTENT")), &cfg); err != nil {
			t.Fatal(err)
		}
		want := []string{"/opt/nerve", "mcp"}
		if perm == "read-only" {
			want = append(want, "--read-only")
		}
		n := cfg.MCP["nerve"]
		if n.Type != "local" || !slices.Equal(n.Command, want) || n.Environment["NERVE_THREAD"] != "w#thread-1" {
			t.Errorf("%s: mcp %+v", perm, cfg.MCP)
		}
		p := cfg.Permission
		switch perm {
		case "full":
			if p != nil || !slices.Contains(inv.args, "--auto") {
				t.Errorf("full: permission %v, argv %q", p, inv.args)
			}
		default:
			bash, _ := p["bash"].(map[string]any)
			if bash["*"] != "deny" || bash["nerve thread messages*"] != "allow" || p["nerve_thread_messages"] != "allow" ||
				(p["nerve_notify"] == "allow") != (perm == "workspace") || (p["edit"] == "allow") != (perm == "workspace") {
				t.Errorf("%s: permission %v", perm, p)
			}
		}
	}
	a, _ := New("opencode", Spec{Env: map[string]string{"OPENCODE_CONFIG_CONTENT": "{}"}})
	ca := a.(*cliAdapter)
	if _, err := ca.build(ca, Request{Prompt: "P"}); err == nil || !strings.Contains(err.Error(), "OPENCODE_CONFIG") {
		t.Errorf("an adapter env with OPENCODE_CONFIG_CONTENT: %v", err)
	}
}

func TestNoMCPNoRegistration(t *testing.T) {
	for _, typ := range []string{"claude", "codex", "gemini", "qwen"} {
		a, _ := New(typ, Spec{})
		ca := a.(*cliAdapter)
		inv, err := ca.build(ca, Request{Prompt: "PROMPT"})
		if err != nil {
			t.Fatal(err)
		}
		if inv.cleanup != nil {
			inv.cleanup()
		}
		if j := strings.Join(inv.args, " "); strings.Contains(j, "mcp") || envValue(inv.env, "GEMINI_CLI_HOME") != "" {
			t.Errorf("%s registers MCP without a server: %s", typ, j)
		}
	}
}
