// Package store is the daemon's state in one bbolt file (nerve.db): local
// threads with their messages and events; people's answers to human turns
// until the engine records them; the index of child threads, and what
// ended children spent that their parents have not counted yet; the
// outbox of remote turns' answers not yet delivered; what each adapter
// spent per UTC day (charged in the same transaction as the answer that
// spent it) and the usage rollup `nerve usage` reads. No secret is here:
// the remotes' tokens are files under NERVE_HOME/tokens (package remote).
// The daemon alone opens it, once, with a lock timeout; every write is
// committed (fsynced) before anyone is told it happened.
package store
