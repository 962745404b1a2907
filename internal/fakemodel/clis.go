package fakemodel

import (
	"fmt"
	"os"
	"path/filepath"
)

// CLIs are the agent CLIs Setup knows, by adapter type (and binary).
var CLIs = []string{"claude", "codex", "gemini", "qwen", "opencode", "copilot", "pi", "kilo", "droid", "continue"}

// Setup points cli at the endpoint url, offline and isolated from the
// machine's own configuration: it writes what the CLI needs under dir and
// returns the adapter's model (may be empty) and env, in nerve.yaml's
// terms. Retries are turned off where the CLI allows it, so a failing
// endpoint fails the turn fast.
func Setup(cli, dir, url string) (model string, env map[string]string, err error) {
	home := filepath.Join(dir, "home")
	if model, env, err = SetupHome(cli, home, url); err != nil {
		return "", nil, err
	}
	env["HOME"] = home
	switch cli {
	case "codex":
		env["CODEX_HOME"] = filepath.Join(home, ".codex")
	case "opencode":
		env["OPENCODE_CONFIG"] = filepath.Join(home, opencodeConfig)
	}
	return model, env, nil
}

// SetupHome is Setup for a CLI whose HOME shows home, such as a sandboxed
// turn's state directory (NERVE_HOME/sandbox/TYPE): every file the CLI
// needs is where it looks by default, and env names no path.
func SetupHome(cli, home, url string) (model string, env map[string]string, err error) {
	write := func(path, content string) {
		if err == nil {
			if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
				err = os.WriteFile(path, []byte(content), 0o600)
			}
		}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", nil, err
	}
	switch cli {
	case "claude":
		env = map[string]string{"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "fake-key",
			"CLAUDE_CODE_MAX_RETRIES": "0"}
	case "codex":
		write(filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(codexConfig, url))
		env = map[string]string{"LOCAL_API_KEY": "fake-key"}
	case "gemini":
		write(filepath.Join(home, ".gemini", "settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},`+
			`"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},`+
			`"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false,"maxAttempts":1}}`)
		// A model of its own skips the "auto" router's side call.
		model = "gemini-test"
		env = map[string]string{"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "fake-key"}
	case "qwen":
		write(filepath.Join(home, ".qwen", "settings.json"), `{"model":{"generationConfig":{"maxRetries":0}},"general":{"enableAutoUpdate":false}}`)
		env = map[string]string{"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "fake-key", "OPENAI_MODEL": "qwen-test"}
	case "opencode":
		write(filepath.Join(home, opencodeConfig), fmt.Sprintf(`{"provider":{"local":{"npm":"@ai-sdk/openai-compatible","name":"local",`+
			`"options":{"baseURL":"%s/v1","apiKey":"fake-key"},"models":{"test":{"name":"test"}}}}}`, url))
		model = "local/test"
		env = map[string]string{}
	default:
		var files map[string]string
		if model, env, files, err = setupMore(cli, home, url); err != nil {
			return "", nil, err
		}
		for path, content := range files {
			write(path, content)
		}
	}
	return model, env, err
}

// opencodeConfig is where opencode reads its config by default, under HOME.
const opencodeConfig = ".config/opencode/opencode.json"

// codexConfig is $CODEX_HOME/config.toml: a custom provider (HTTP only,
// no WebSocket), retries off, and nothing that reaches for the network
// (../shared/CLIS.md).
const codexConfig = `model = "gpt-test"
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
`
