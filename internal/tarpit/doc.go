// Package tarpit is a server for tests of what a peer that never answers
// does to nerve: a repository whose fetch hangs, a webhook receiver that
// holds its deliveries.
package tarpit
