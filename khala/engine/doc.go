// Package engine holds every transition of a Khala thread: start, route
// (the workflow package's moderator), claim with its hand-over to waiting
// long polls, heartbeat, answer, release, cancel, a person's answer, a
// child's start and end, a parallel round's merge, budgets, priority,
// idle turns, expired leases, and the webhook outbox entries each of them
// queues.
//
// Each transition reads a view of one thread through khaladb.Storage and
// decides its change as a function of that view (ThreadChange), so that
// UpdateThread may run it again on a fresher one; only after the change is
// committed does the engine do what it calls for beyond its thread (start
// child threads, tell a parent, wake the sweeper). It speaks no HTTP and
// opens no backend: package khala is its HTTP shell, mapping its refusals
// (Error, by Kind, and the khaladb error kinds) to statuses, and whoever
// serves opens the storage.
//
// In memory it keeps only what any replica may lose: parsed definitions
// by content hash (defs.go), moderator documents between a thread's turns
// (threaddocs.go), the long polls waiting here (handoff.go) and the
// sweeper's next deadline (sweeper.go).
package engine
