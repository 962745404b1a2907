// Package workflow is what a workflow is and how a thread moves: YAML
// definitions, refs ([REMOTE/]WORKFLOW[#THREAD]), the JSONata moderator,
// the routing rules that turn its output into the next turns or the end,
// the local thread engine, and extract (structured output checked against
// a role's meta schema). The daemon and the Khala server share it, so a
// thread is routed by the same code wherever it runs.
package workflow
