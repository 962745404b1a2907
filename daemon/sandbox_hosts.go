package daemon

import (
	"cmp"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
)

// vendorEndpoint is where a type's CLI finds its model endpoint: the
// variables naming its base URL (the adapter's env, else the daemon's),
// the config files it reads one from (relative to the CLI's HOME, or named
// by a variable), and the vendor's hosts when nothing says otherwise
// (../shared/CLIS.md; sandbox.hosts adds the rest).
type vendorEndpoint struct {
	vars     []string
	files    []string // HOME-relative config files with a base URL
	fileVars []string // variables naming such a file or its directory
	dirFile  string   // the file in a directory fileVars names (default config.toml)
	defaults []string // https URLs; the first is vars[0]'s default
}

var vendorEndpoints = map[string]vendorEndpoint{
	"claude": {vars: []string{"ANTHROPIC_BASE_URL"}, defaults: []string{"https://api.anthropic.com"}},
	// Codex reads no endpoint variable: a provider's base_url in config.toml.
	// Signed in with ChatGPT it calls chatgpt.com and refreshes at auth.openai.com.
	"codex": {files: []string{".codex/config.toml"}, fileVars: []string{"CODEX_HOME"},
		defaults: []string{"https://api.openai.com", "https://chatgpt.com", "https://auth.openai.com"}},
	"gemini": {vars: []string{"GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"},
		defaults: []string{"https://generativelanguage.googleapis.com", "https://cloudcode-pa.googleapis.com", "https://oauth2.googleapis.com"}},
	"qwen": {vars: []string{"OPENAI_BASE_URL"},
		defaults: []string{"https://dashscope.aliyuncs.com", "https://chat.qwen.ai", "https://portal.qwen.ai"}},
	// opencode's providers are in its config (baseURL); models.dev is its model catalogue.
	"opencode": {files: []string{".config/opencode/opencode.json", ".config/opencode/opencode.jsonc"}, fileVars: []string{"OPENCODE_CONFIG"},
		defaults: []string{"https://models.dev"}},
	"cursor": {defaults: []string{"https://api2.cursor.sh"}},
	// The CLIs of ../shared/CLIS-MORE.md (docs/agent-clis.md): a vendor
	// host is listed only where that document names it; sandbox.hosts
	// adds the rest.
	"copilot": {vars: []string{"COPILOT_PROVIDER_BASE_URL"}, defaults: []string{"https://api.githubcopilot.com", "https://api.github.com"}},
	"pi":      {files: []string{".pi/agent/models.json"}, fileVars: []string{"PI_CODING_AGENT_DIR"}, dirFile: "models.json"},
	"kilo": {files: []string{".config/kilo/kilo.json", ".config/kilo/config.json", ".config/kilo/opencode.json"},
		fileVars: []string{"KILO_CONFIG"}},
	"droid":    {files: []string{".factory/config.json", ".factory/settings.json"}},
	"continue": {files: []string{".continue/config.yaml"}, fileVars: []string{"CONTINUE_GLOBAL_DIR"}, dirFile: "config.yaml", defaults: []string{"https://api.continue.dev"}},
}

// modelEndpoint is a base URL the turn's CLI calls; envVar names the
// variable that set it, or would (vars[0] for the vendor's default).
type modelEndpoint struct {
	url    *url.URL
	envVar string
}

// baseURLRE finds base URLs in a CLI's config file: TOML's base_url = "…",
// JSON's "baseURL" or "baseUrl": "…", YAML's apiBase: … (quoted or not).
var baseURLRE = regexp.MustCompile(`(?i)"?(?:base_?url|apibase)"?\s*[:=]\s*"?(https?://[^"\s,}]+)`)

// modelEndpoints are adapter ac's model endpoints as its config says,
// with state the CLI's HOME as the sandbox shows it (its state directory).
func modelEndpoints(ac config.Adapter, state string) []modelEndpoint {
	v := vendorEndpoints[ac.Type]
	lookup := func(name string) string {
		if s, ok := ac.Env[name]; ok {
			return s
		}
		return os.Getenv(name)
	}
	var out []modelEndpoint
	addURL := func(s, envVar string) {
		if u, err := url.Parse(s); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			out = append(out, modelEndpoint{url: u, envVar: envVar})
		}
	}
	set := false
	for _, name := range v.vars {
		if s := lookup(name); s != "" {
			addURL(s, name)
			set = true
		}
	}
	var files []string
	for _, name := range v.fileVars {
		if p := lookup(name); p != "" {
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				p = filepath.Join(p, cmp.Or(v.dirFile, "config.toml"))
			}
			files = append(files, p)
		}
	}
	if state != "" {
		for _, rel := range v.files {
			files = append(files, filepath.Join(state, rel))
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) > 1<<20 {
			continue
		}
		for _, m := range baseURLRE.FindAllSubmatch(b, -1) {
			addURL(string(m[1]), "")
		}
	}
	for i, d := range v.defaults {
		envVar := ""
		if i == 0 && len(v.vars) > 0 && !set {
			envVar = v.vars[0]
		}
		addURL(d, envVar)
	}
	return out
}

// cliHome is the HOME the adapter's CLI sees its state in, on the host:
// its own directory under NERVE_HOME/sandbox, or the owner's with
// share_state (adapter.StatePaths lays both out alike).
func cliHome(cfg *config.Config, home, typ string) string {
	if len(adapter.StatePaths(typ)) == 0 {
		return ""
	}
	if cfg.Sandbox.ShareState {
		h, _ := os.UserHomeDir()
		return h
	}
	return filepath.Join(home, "sandbox", typ)
}

// hostPort is u's host:port, the scheme's port when it names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// isLoopback reports whether host (no port) is this machine: inside the
// sandbox such an address is the sandbox's own, so it needs a forward.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
