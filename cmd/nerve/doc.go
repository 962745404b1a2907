// Command nerve is the CLI and daemon of nerve: AI coding agents working as
// a team. main stays trivial: Main builds the command tree, runs it and maps
// the error to an exit code in one place.
package main
