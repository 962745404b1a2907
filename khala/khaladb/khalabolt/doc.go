// Package khalabolt is the embedded Khala storage backend: one bbolt file,
// opened by one process (Open; another process's lock is
// khaladb.ErrLocked after a timeout). It implements khaladb.Storage.
//
// Every write is one bbolt transaction, fsynced before it returns.
// Requests that arrive while a commit is on disk go together into the
// next one (group commit, commit.go); a thread's records sit in one key
// range (store.go has the layout, codec.go the turn records), so a claim
// dirties one leaf of the file and an answer two or three. UpdateThread
// runs its fn outside the transaction, under a per-thread lock, and
// commits the change only if the thread's version and the revisions of
// the turns it writes have not moved (apply.go); claims and heartbeats may
// move them meanwhile, and fn then runs again. Events are indexed in
// memory per thread on first read (events.go).
package khalabolt
