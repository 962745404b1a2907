// Package khalapg is the PostgreSQL Khala storage backend: any number of
// stateless replicas of the server over one database. It implements
// khaladb.Storage.
//
// What one replica commits the others read; the only per-replica state is
// wake-up hints (carried between replicas by LISTEN/NOTIFY, notify.go) and
// caches of what never changes. Concurrency rests on row locks taken in
// one order (store.go); a claim is one statement with SKIP LOCKED
// (queue.go) that also reads what the turn's answer needs, so an answer
// through the same replica is one more statement, checked against the
// version the claim read (fastpath.go, view.go, change.go). A replica's
// concurrent claims, and its concurrent answers, share statements
// (batch.go, claimbatch.go, changebatch.go): the database's cost of a
// statement is mostly its own, not its rows'.
//
// The schema is migrations/NNN_name.sql, embedded and applied in order at
// Open in one transaction under an advisory lock (migrate.go); a database
// migrated by a newer nerve is refused (ErrSchemaTooNew). A released
// migration never changes: a change is a new file.
package khalapg
