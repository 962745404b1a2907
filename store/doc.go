// Package store is the daemon's state in one bbolt file (nerve.db):
// threads, their messages and events, and the secrets and queues of later
// features, and what each adapter spent per UTC day (charged in the same
// transaction as the answer that spent it). The daemon alone opens it, once, with a lock timeout; every
// write is committed (fsynced) before anyone is told it happened.
package store
