package fakemodel

import "strings"

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
