// Package khaladb is the storage contract of the Khala server: the Storage
// interface every backend implements, the records it keeps (Turn, Thread,
// ThreadView, ThreadChange, Webhook, Agent, ...), the errors a backend
// returns so the HTTP layer maps them to the same status whatever the
// backend, and the wake-up topics of Storage.Changed.
//
// It is the room River's riverdriver is to its drivers: the server
// (package khala) depends on this package alone, each backend is a
// package of its own that depends on it (khalabolt: one bbolt file, one
// process; khalapg: PostgreSQL, any number of stateless replicas), and
// khaladbtest is the one suite that checks the contract on both. A backend
// never imports the server.
//
// Besides the contract it has what every backend needs to keep it the
// same way: turn and thread ids (TurnID, ParseTurnID, ThreadID), claim ids
// (NewClaimID), constant-time token hash comparison (SameHash), and the
// wake-up broadcaster behind Changed (Hints).
package khaladb
