// Package workflow is what a workflow is and how a thread moves: YAML
// definitions, refs ([REMOTE/]WORKFLOW[#THREAD]), the JSONata moderator,
// the routing rules that turn its output into the next turns or the end,
// the local thread engine, and extract (structured output checked against
// a role's meta schema). The daemon and the Khala server share it, so a
// thread is routed by the same code wherever it runs.
//
// # Workspaces
//
// A definition may declare `workspace: {repo, base}` (WorkspaceSpec,
// checked when it is parsed; defaults are filled in when a thread starts,
// by whoever runs git). A thread records its Workspace {repo, base (a
// commit), branch, head}; a message its Commit and Changes. This package
// runs no git: the engine moves the head to a single turn's commit, and
// for a round of parallel turns calls the Engine's Merge (MergeFunc), which
// merges the round's commits in step order, puts a conflict on the message
// concerned (ErrorKindMerge) and returns the new head, before the moderator
// is asked. The moderator's document has `workspace`, and each message
// `commit` and `changes` (null when absent), when the thread has a
// workspace; a thread without one costs nothing more than before.
//
// # People and child workflows
//
// A role with `human: true` is answered by a person: the engine records a
// turn.waiting event for it and the caller's TurnFunc waits for the answer
// (CheckAnswer validates it first). A moderator's {"workflow", "input",
// "role"?} is a child turn (Turn.IsChild): the caller starts a child
// thread (Thread.Parent, Depth; CheckDepth) and its result becomes the
// step's message (Message.Child). Who waits, and where answers and
// children live, is the daemon's and Khala's business.
package workflow
