// Package mcp is `nerve mcp`: a Model Context Protocol server over stdio
// (github.com/modelcontextprotocol/go-sdk) that gives agents and IDEs
// nerve's tools as tools: thread_messages, thread_status, notify,
// knowledge_query, workflow_list and workflow_run.
//
// Inside a turn (NERVE_THREAD set) the thread arguments default to the
// turn's thread and thread_messages answers from the turn's snapshot, as
// `nerve thread messages` does (package threadquery). Outside a turn any
// MCP client can list, start and watch workflows.
//
// The server starts without touching the daemon, nerve.yaml or a remote:
// each is reached on the first call that needs it, so a client's
// initialize is answered at once. A tool's failure is a tool error (one
// sentence the agent can act on), never the end of the server: a panic in
// a call is recovered and reported as that call's error.
package mcp
