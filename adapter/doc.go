// Package adapter runs one agent CLI (Claude Code, Codex, Gemini CLI,
// Cursor's agent, Hermes, Qwen Code, opencode, GitHub Copilot CLI, pi,
// Crush, Kilo Code, Factory's Droid, Continue's cn, Auggie, or any command)
// as a subprocess for one turn and turns what it prints into a Result.
// new.go holds the one table of types: adding one is a file and its test
// data.
//
// Each built-in type keeps its command line, environment and output parser
// in one file (claude.go, codex.go, …), checked against the real CLIs'
// --help (testdata/FLAGS.md). The permission posture (workspace, read-only,
// full) is the machine owner's choice in nerve.yaml and maps to each CLI's
// own flags; nothing in a turn's prompt can change it.
//
// process.go is the one runner they share. A turn's CLI gets /dev/null on
// stdin (the prompt, for exec or when it is too long for the command line)
// so that an agent waiting for input fails instead of hanging, runs in its
// own session (so its own process group) in the request's workdir, and is
// killed with its whole group (SIGTERM, then SIGKILL) on timeout or cancel
// and after it exits, so no grandchild outlives the turn. One that left
// the group the daemon ends: it is every turn's subreaper (daemon/reaper.go).
// Output is read line by line with bounded memory: lines are cut at 8 MiB
// and content at 1 MiB, so a CLI that floods stdout cannot exhaust the
// daemon.
//
// The exit status alone is never trusted: a turn succeeded when the CLI's
// own final event says so (Claude's and Cursor's result, Codex's
// turn.completed, Gemini's result with status success, pi's last
// stopReason, Copilot's result exit code); only exec, Hermes and Crush,
// which have no event stream, are judged by their exit status.
// Failures are *Error values naming the adapter, the exit status and the
// last lines of stderr, and carrying the usage reported before the failure.
package adapter
