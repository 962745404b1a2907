// Package store is the daemon's state in one bbolt file (nerve.db):
// threads, their messages and events, and the secrets and queues of later
// features. The daemon alone opens it, once, with a lock timeout; every
// write is committed (fsynced) before anyone is told it happened.
package store
