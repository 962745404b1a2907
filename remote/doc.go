// Package remote is nerve's side of a Khala server: a typed HTTP client
// with per-request timeouts and retries on transient errors only, errors
// that say what to do, the remotes section of nerve.yaml, and the agent
// tokens kept in $NERVE_HOME/tokens (mode 0600, never in nerve.yaml or
// logs).
package remote
