// Package khaladbtest is the contract suite of khaladb.Storage: the
// behaviour every Khala storage backend keeps, written once and run by
// each backend's own tests (khalabolt, khalapg) against a fresh database.
// The server's tests (package khala) stay above it, over HTTP.
//
// Exercise runs all of it; each exported test function runs one part
// (ClaimExactlyOnce, UpdateThreadReruns, DueTurns, Events, …), and the
// helpers (StartThread, Answer) set up threads the way the server would,
// for a backend's own tests of what only it does.
package khaladbtest
