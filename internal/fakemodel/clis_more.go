package fakemodel

import (
	"fmt"
	"path/filepath"
)

// Binaries maps an adapter type to its binary where the two differ.
var Binaries = map[string]string{"kilo": "kilo", "droid": "droid", "continue": "cn"}

// Binary is the binary of adapter type cli.
func Binary(cli string) string {
	if b, ok := Binaries[cli]; ok {
		return b
	}
	return cli
}

// setupMore is SetupHome for the CLIs of ../shared/CLIS-MORE.md: the
// files to write (path: content, where each CLI looks by default under
// home) besides the model and env.
func setupMore(cli, home, url string) (model string, env, files map[string]string, err error) {
	env = map[string]string{}
	files = map[string]string{}
	switch cli {
	case "copilot":
		// BYOK: no GitHub login; COPILOT_OFFLINE leaves GitHub's
		// services (auth, telemetry, its MCP server) out.
		model = "copilot-test"
		env["COPILOT_PROVIDER_BASE_URL"] = url + "/v1"
		env["COPILOT_PROVIDER_API_KEY"] = "fake-key"
		env["COPILOT_PROVIDER_TYPE"] = "openai"
		env["COPILOT_PROVIDER_WIRE_API"] = "completions"
		env["COPILOT_OFFLINE"] = "true"
	case "pi":
		agent := filepath.Join(home, ".pi", "agent")
		model = "local/pi-test"
		files[filepath.Join(agent, "models.json")] = fmt.Sprintf(`{"providers":{"local":{"baseUrl":"%s/v1","api":"openai-completions",`+
			`"apiKey":"fake-key","models":[{"id":"pi-test","contextWindow":128000,"maxTokens":8000,`+
			`"cost":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0}}]}}}`, url)
		files[filepath.Join(agent, "settings.json")] = `{"retry":{"enabled":false,"provider":{"maxRetries":0}}}`
	case "kilo":
		cfg := filepath.Join(home, ".config", "kilo", "kilo.json")
		model = "local/test"
		files[cfg] = fmt.Sprintf(`{"provider":{"local":{"npm":"@ai-sdk/openai-compatible","name":"local",`+
			`"options":{"baseURL":"%s/v1","apiKey":"fake-key"},"models":{"test":{"name":"test"}}}},"enabled_providers":["local"]}`, url)
		env["KILO_DISABLE_MODELS_FETCH"] = "true"
		env["KILO_SESSION_RETRY_LIMIT"] = "1"
	case "droid":
		// A custom model needs no Factory login; airgap keeps it off
		// Factory's services.
		model = "custom:Fake-0"
		files[filepath.Join(home, ".factory", "config.json")] = fmt.Sprintf(`{"custom_models":[{"model_display_name":"Fake",`+
			`"model":"droid-test","base_url":"%s/v1","api_key":"fake-key","provider":"generic-chat-completion-api","max_tokens":8000}]}`, url)
		env["FACTORY_AIRGAP_ENABLED"] = "true"
	case "continue":
		global := filepath.Join(home, ".continue")
		files[filepath.Join(global, "config.yaml")] = fmt.Sprintf("name: fake\nversion: 1.0.0\nschema: v1\nmodels:\n"+
			"  - name: fake\n    provider: openai\n    model: continue-test\n    apiBase: %q\n    apiKey: fake-key\n    roles: [chat, edit, apply]\n", url+"/v1")
	default:
		return "", nil, nil, fmt.Errorf("fakemodel: no setup for %q", cli)
	}
	return model, env, files, nil
}
