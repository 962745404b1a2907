// Package envlist merges environment lists (NAME=value entries), as the
// adapters and the sandbox build a turn's environment.
package envlist
