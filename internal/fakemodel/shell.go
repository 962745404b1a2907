package fakemodel

import (
	"encoding/json"
	"strings"
)

// shellTools are the CLIs' shell tools and the arguments each requires
// besides the command (../shared/CLIS-MORE.md): bash (copilot, pi, kilo,
// opencode), Bash (claude, continue), Execute (droid), run_shell_command
// (gemini, qwen).
var shellTools = map[string]map[string]any{
	"bash":              {"description": "Print a greeting"},
	"Bash":              {},
	"Execute":           {"summary": "Print a greeting", "riskLevel": "low", "riskLevelReason": "It only prints text"},
	"run_shell_command": {"description": "Print a greeting"},
}

// shellStep runs ShellCommand through the first shell tool offered, then
// answers with what it printed.
func shellStep(results map[string]string, offered []string) step {
	for name := range shellTools {
		if res, ok := results[name]; ok {
			return step{text: "Tool said: " + strings.TrimSpace(res)}
		}
	}
	for _, name := range offered {
		if extra, ok := shellTools[name]; ok {
			args := map[string]any{"command": ShellCommand}
			for k, v := range extra {
				args[k] = v
			}
			return step{tool: name, args: args}
		}
	}
	return step{text: "No shell tool was offered; tools: " + strings.Join(offered, " ")}
}

// ThreadCommand is how the fake agent reads its thread through a shell.
const ThreadCommand = "nerve thread messages --last 1 --json"

// threadByShell runs ThreadCommand through the shell tool offered, then
// quotes the content of the message it printed.
func threadByShell(results map[string]string, offered []string) (step, bool) {
	for name := range shellTools {
		res, ok := results[name]
		if !ok {
			continue
		}
		for i := strings.IndexByte(res, '{'); i >= 0; {
			var m struct {
				Content string `json:"content"`
			}
			if json.NewDecoder(strings.NewReader(res[i:])).Decode(&m) == nil && m.Content != "" {
				return step{text: "Quoted: " + m.Content}, true
			}
			j := strings.IndexByte(res[i+1:], '{')
			if j < 0 {
				break
			}
			i += 1 + j
		}
		return step{text: "Could not find a message in: " + res}, true
	}
	for _, name := range offered {
		if extra, ok := shellTools[name]; ok {
			args := map[string]any{"command": ThreadCommand}
			for k, v := range extra {
				args[k] = v
			}
			return step{tool: name, args: args}, true
		}
	}
	return step{}, false
}
