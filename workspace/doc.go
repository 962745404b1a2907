// Package workspace is the git layer of thread workspaces (DESIGN.md,
// "Workspaces: the work travels with the thread"): each thread gets a
// branch, each turn a worktree of it, and the daemon commits, merges and
// pushes on the agent's behalf with the real `git` binary.
//
// A Manager owns two directories under NERVE_HOME: repos/ (a bare mirror per
// cloud repository URL, fetched only when a turn needs a commit it lacks)
// and worktrees/ (one per thread, reused by its consecutive turns on this
// machine, and one per parallel turn). Every worktree is detached: the
// thread branch moves only when a turn is published, by a compare-and-swap
// (`git update-ref B NEW OLD`) for a local thread and by a push with a lease
// on the head the turn started from for a cloud thread: on the branch's
// absence for the thread's first push, which creates it, so a branch the
// remote had before the thread pushed (its main, another thread's) is
// never moved, and Open refuses it before the agent runs (ownbranch.go).
// Whatever an agent
// does inside its worktree, a half-finished turn never reaches the branch,
// and a kill -9 leaves a worktree the next Open resets to the head the turn
// starts from.
//
// The calls, in the order a thread makes them:
//
//   - Start, once per thread: checks the branch name, resolves the base to
//     a commit (refusing one the remote lacks) and creates a local thread's
//     branch. Resolve does the checks alone, for a cloud thread whose
//     number (and so its branch) Khala gives later; a cloud thread's first
//     push creates its branch.
//   - Open before a turn: the worktree at the thread's head, its path for
//     NERVE_WORKDIR.
//   - Tree.Finish after the turn: commits what the agent left, counts the
//     changes, moves the branch (or, for a parallel turn, keeps the commit
//     for Merge).
//   - Merge when the last of parallel turns answers: their commits into the
//     branch in step order, stopping at the first conflict.
//   - Diff, Checkout for `nerve thread diff` and `nerve thread checkout`
//     (Checkout only in the thread's repository, never over uncommitted
//     work); Remove when a thread ends or moves to another machine
//     (CloudKeys lists the cloud threads' worktrees a daemon holds, from
//     their records); Prune for what a crash left.
//
// Scratch is the other place a turn works in: the private directory of a
// thread (or of one remote turn) with neither a workspace nor a workdir,
// outside NERVE_HOME, which Prune also removes when its thread is gone.
//
// Errors are *Error values: Kind "workspace" or "merge", one sentence a
// person can act on, and a sentinel (ErrNoGit, ErrPushRefused, ...) for
// errors.Is. Git runs with GIT_TERMINAL_PROMPT=0, no system config and no
// hooks, under a deadline per command (Deadlines: ErrTimeout, its process
// group killed), with the ext and fd transports refused whatever the
// user's gitconfig says (gitcmd.go); URLs in messages lose their user
// info, so no credential is logged.
//
// The package is a leaf: it imports nothing of nerve but internal/ leaves.
package workspace
