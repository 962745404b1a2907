// Package khala is the Khala server: the shared turn queue of a pool of
// interchangeable agents. It stores cloud workflow definitions and their
// threads, routes each thread with the workflow package's moderator
// (workflow.Route: the evaluation and checks the daemon's workflow.Engine
// uses for local threads; Khala's own engine, package khala/engine, keeps
// threads in its storage and leases their turns instead of running them:
// this package is its HTTP shell), queues the
// turns it emits, leases each to exactly one agent at a time, re-queues
// what a dead agent dropped, and records every event. `nerve khala serve`
// runs it.
//
// # API
//
// The Khala HTTP API v1 of DESIGN.md, JSON over HTTP. Every endpoint but
// GET /v1/health takes Authorization: Bearer TOKEN; errors are
// {"error": {"code", "message"}}. Codes: bad_request, invalid_workflow,
// invalid_input, invalid_answer (400); unauthorized (401); forbidden,
// not_holder (403); not_found (404); method_not_allowed (405); name_taken, branch_taken,
// claim_lost, thread_ended, not_waiting (409); too_large (413); too_deep
// (422); internal (500); unavailable, timeout (503). A 200 or
// 201 is sent only after the change is committed (fsynced).
//
// Beyond the table: PUT /v1/workflows/{name} takes the definition as a JSON
// object of its fields, as {"source": YAML}, or as the YAML itself with a
// YAML content type; POST /v1/turns/{turn}/events {"claim", "events"}
// adds a running turn's detections (stall, errors, malformed) and its
// agent's notices (type notify, status info, warning or blocking; also
// posted to the thread's webhook with "level" and "message") to its
// thread's trace, checked like a heartbeat; a response's "error" is a string
// or {"kind", "message"}, and it may carry "adapter" and "usage"; a claim's
// "wait" is "30s" or a number of seconds, capped at 60s by default; each
// leased turn also says its "attempt"; GET /metrics (agent token) is the
// Prometheus text format; /v1/threads/{id}/events resumes after
// Last-Event-ID or ?after=SEQ. GET /v1/agents (an agent's token, or the
// local admin token) lists [{"name", "enrolled_at", "last_seen",
// "turns_held"}] by name: last_seen is the agent's last request (null:
// none recorded), kept in memory per replica and stored about once a
// minute (seen.go); turns_held are the turns leased to it (null: none).
//
// # Workspaces
//
// POST /v1/workflows/{name}/threads takes "workspace": {"repo", "base",
// "branch"?} (api.StartWorkspace; unknown keys are 400). repo defaults to
// the definition's and must be one every serving agent reaches (a git URL
// or an absolute path, no password); base is required as a full commit
// id (the CLI resolves a revision first), and is required whenever the
// definition declares a workspace; branch defaults to
// nerve/WORKFLOW/thread-N and must be a name git check-ref-format
// --branch accepts. Every thread object has "workspace": {"repo", "base",
// "branch", "head"}, null without one. A response may carry "commit" (a
// full id) and "changes" {"files", "insertions", "deletions"}: they go on
// the message, and the commit becomes the thread's head in the change that
// records the answer, before the moderator routes (so it sees the moved
// head); the webhook at the thread's end carries its "workspace" too.
// Khala runs no git: the agent's daemon pushed the branch to that
// commit, with a lease, before it answered. Both are in the JSON records
// of threads and messages, so no schema change was needed, and a message
// without them is stored exactly as before.
//
// Turns queued together for a workspace thread are a parallel round: each
// is claimed with "parallel": true (its daemon keeps its commit under its
// turn ref, not the branch), and its answer leaves the head alone. The
// round's last answer queues a merge turn instead of asking the moderator:
// role "nerve.merge" (api.MergeRole), step MergeStepBase plus the round's
// last step, claimable by a claim of its workflow whatever roles it names, with
// "merge": {"from", "turns": [{"step", "commit"}]} in step order. Its
// answer carries the branch's new head in "commit" and, on a conflict,
// "error" {kind "merge", message: the files} and the conflicting "step";
// the head moves, the error goes on that step's message (kept in the
// thread record and laid over the stored message, which never changes),
// and the moderator is asked. See engine/merge.go.
//
// # Tokens
//
// Four kinds, each 192 random bits behind a prefix that says what it is:
// khala_enroll_ (enrollment: POST /v1/agents only, limited uses and
// lifetime), khala_agent_ (everything else), khala_person_ (a person's:
// answers, inbox, reading) and khala_admin_ (the local admin path). Only SHA-256 hashes are stored; comparisons are
// constant-time; no token is ever logged or echoed in an error.
//
// # People and child threads
//
// People answer human turns (a role with human: true) with their own
// tokens, khala_person_ (nerve khala user add|list|remove, through the
// admin path while a server holds the bbolt file, as enroll-token does:
// GET, POST /v1/admin/users, DELETE /v1/admin/users/{name}). A person's
// token answers (POST /v1/threads/{id}/turns/{turn}/answer {"content",
// "meta"?}) and lists its inbox (GET /v1/inbox: []workflow.Waiting), and
// reads threads, workflows, messages and traces; anything else is 403
// forbidden, and an agent's token on the answer or the inbox is 403 too.
// People are read from the store on every request, so a removed person's
// token stops at once on every replica. An answer is refused, with nothing
// recorded, when its meta does not match the role's schema (400
// invalid_answer), the person is not in answered_by (403), the turn is not
// a person's, or was answered, or its thread ended (409 not_waiting or
// thread_ended). A human turn is stored in state waiting: no claim takes
// it, it has no lease nor attempts, limits.idle raises turn.idle for it,
// and its queueing records turn.waiting (trace and webhook). GET
// /v1/threads/{id} lists a thread's waiting turns in "waiting" (with turn
// ids) and its children in "children": {"running", "completed",
// "failed", "cancelled", "threads": [{"ref", "thread", "workflow", "step",
// "status"}]}, null when it has none.
//
// A moderator's child turn ({"workflow", "input", "role"?}) is stored in
// state child with the child's thread id, drawn before the change is made
// (engine/routing.go); once the change is committed the child thread is
// created with "parent" {"ref", "thread", "step"} and "depth" one more
// than its parent's, and when it ends its result (or its error, kind
// child) closes the step (engine/children.go). A child that cannot start
// (unknown workflow, bad input) closes the step with an error of kind
// child; a child deeper than --max-spawn-depth fails its parent. POST /v1/workflows/{name}/threads
// takes "parent": {"thread", "step"?} for a child an agent starts from
// inside a turn: past the depth it is 422 too_deep; under an ended parent,
// 409. Cancelling or ending a thread cancels its running children. Each
// of these steps is its own commit: the sweeper checks every child turn
// at least once a minute and does again what a crash left undone.
//
// # Issuing enrollment tokens
//
// bbolt lets one process open the database, so `nerve khala enroll-token`
// works two ways. When no server holds the file it opens the file itself.
// When a server does, it reads the admin file the server wrote beside the
// database (khala.db.admin, mode 0600: the server's URL and a fresh admin
// token, replaced at every start and removed at shutdown) and calls
// POST /v1/admin/enroll-tokens, which takes only that token and only from
// a loopback address. Whoever can read the database's directory could
// read the database anyway, so the file grants nothing new. On PostgreSQL
// no process holds the database, and the command writes the token there
// itself (IssuePostgresToken).
//
// # Leases
//
// A claim leases a turn for the definition's limits.claim (default 10m);
// heartbeats extend it. A lease is the holder's until it expires: after
// that, a heartbeat or response with it is 409 claim_lost, and the
// sweeper re-queues the turn with attempt + 1, or fails the thread when
// the expired attempt was limits.max_attempts (default 3). Release gives a
// turn back at once, keeping its attempt. A turn queued unclaimed for
// limits.idle raises turn.idle once per time it is queued, and the
// thread's webhook hears of it; it stays queued. When a thread ends, its
// open turns are cancelled but keep their claims: a heartbeat answers
// cancel: true and a response is 409.
//
// A claim id is no secret (every trace shows it), so a lease is held by
// the claim and the agent it was leased to together: another agent's
// response, heartbeat, release or events with it are 403 not_holder and
// change nothing; the holder's lease and answer are untouched. The code,
// not the status, tells an agent to drop its work: a 403 from a proxy in
// between is retried.
//
// # Durability and speed
//
// Every write is one bbolt transaction, fsynced (twice: pages, then meta)
// before the request is answered. Requests that arrive while a commit is
// on disk go together into the next one (group commit, khalabolt),
// and a thread's records sit in one key range, so a commit writes a few
// pages; the moderator runs outside the transaction, under the thread's
// lock. On PostgreSQL a claim is one statement, which also reads what the
// turn's answer needs; the answer, through the same replica, is one more
// (the change, checked against the version the claim read), and otherwise
// two round trips (the view read under the thread's row lock; then, after
// the moderator, the change and its COMMIT). The server's own group commit
// shares the flushes. Measure with go test
// ./cmd/nerve -run '^$' -bench Khala (both backends).
//
// # Web console
//
// Every path outside /v1/ and /metrics is the web console (package
// console, mounted in console.go), which reads the storage through the
// same interface as the handlers. People sign in with their token (`nerve
// khala user add`; Options.PersonAuth, by default PersonByToken); agents',
// enrollment and admin tokens are refused before it is asked. Every
// signed-in request checks the person is still there (recheck), so a
// removed person's session ends at once. The inbox and its answer form go
// through the API's own inbox and answer paths (Server.inbox, answer).
//
// # Scopes
//
// Every token carries scopes (scopes.go): agents claim, start and publish;
// people answer, cancel and use the console; the admin token may do all.
// A workflow is its first publisher's (WorkflowRecord.Owner, checked by
// the storage as it writes) and a thread its initiator's: publishing over,
// cancelling or attaching a child to another agent's is 403 unless the
// caller overrides (admin, a person with cancel, a legacy token). Tokens
// stored before scopes have none and keep the legacy set. A revoked agent
// leaves every replica's cache (khalapg: a NOTIFY in the revoke's
// transaction).
//
// # Storage
//
// The server keeps everything through khaladb.Storage, the contract in its
// own package (khaladb: the interface, its records, errors and wake-up
// topics). Each backend is a package that implements it and imports only
// khaladb: khalabolt, the embedded bbolt file, and khalapg, PostgreSQL for
// several stateless replicas of one database (row locks in one order, SKIP
// LOCKED claims, LISTEN/NOTIFY wake-ups, migrations under an advisory
// lock; docs/khala-postgres.md is the operator's side of it). khaladbtest
// is the contract suite both run. This package opens a backend only in
// Serve and on the admin path (admin_open.go); the rest of it, the HTTP
// layer, the engine with its sweeper, and webhooks, sees the interface
// alone (and khaladb.SharedWrites, an optional one, for metrics). Nothing
// lives only in one process's memory but wake-up hints, the long polls a
// new turn may be handed to (engine/handoff.go: the turn is written
// claimed in the commit that queues it, so a backend sees only a
// ThreadChange), and
// caches (of immutable data, and of views the database checks before a
// change made from them is written).
package khala
