package adapter

import (
	"encoding/json"
	"slices"
	"strings"
)

// MCPServer is nerve's own MCP server (`nerve mcp`) as an adapter
// registers it with its CLI for one turn, so the agent has nerve's tools
// as tools. The turn executor fills it in: Command is the running nerve
// binary, so the server is the same nerve whatever PATH the CLI gives it.
type MCPServer struct {
	// Command is the nerve executable.
	Command string
	// Args are its arguments, normally ["mcp"]; the adapter adds
	// --read-only under the read-only posture.
	Args []string
	// Env is what the server needs of the turn (NERVE_THREAD,
	// NERVE_THREAD_SNAPSHOT, NERVE_STEP, NERVE_HOME, NERVE_WORKDIR), as
	// NAME=value. Most CLIs pass their own environment on, which has them
	// already; those that filter it (codex) are given these explicitly.
	Env []string
}

// MCPName is the name nerve's server is registered under: its tools reach
// the model as mcp__nerve__thread_messages (claude), mcp_nerve_… (gemini)
// and the like.
const MCPName = "nerve"

// MCPReadTools are the tools of `nerve mcp` that only read: all that
// `nerve mcp --read-only` offers. MCPWriteTools are the rest. The mcp
// package's tests hold both lists to what the server offers.
var (
	MCPReadTools  = []string{"thread_messages", "thread_status", "knowledge_query", "workflow_list"}
	MCPWriteTools = []string{"notify", "workflow_run"}
)

// mcpTools are the tool names of nerve's server under a posture.
func mcpTools(perm string) []string {
	if perm == PermReadOnly {
		return slices.Clone(MCPReadTools)
	}
	return append(slices.Clone(MCPReadTools), MCPWriteTools...)
}

// mcpArgs are the server's arguments under a posture: read-only gets the
// read tools only, from the server itself, whatever the CLI allows.
func mcpArgs(s *MCPServer, perm string) []string {
	args := slices.Clone(s.Args)
	if perm == PermReadOnly && !slices.Contains(args, "--read-only") {
		args = append(args, "--read-only")
	}
	return args
}

// mcpEnvMap is s.Env as a map, for the CLIs' JSON configs.
func mcpEnvMap(s *MCPServer) map[string]string {
	m := make(map[string]string, len(s.Env))
	for _, kv := range s.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// mcpStdioJSON is the usual JSON of a stdio server entry (claude's
// --mcp-config, gemini's and qwen's mcpServers): command, args, env.
func mcpStdioJSON(s *MCPServer, perm string, extra map[string]any) map[string]any {
	m := map[string]any{"command": s.Command, "args": mcpArgs(s, perm)}
	if env := mcpEnvMap(s); len(env) > 0 {
		m["env"] = env
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// tomlString quotes s as a TOML basic string: JSON's escapes are all
// valid TOML escapes.
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tomlStrings is a TOML array of strings.
func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
