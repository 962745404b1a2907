// Package reflex holds the rules that turn signals into actions, and the
// action that runs a turn. The rules: a turn claimed by a khala sense is
// run with the named adapter (do: turn), any signal may start a local
// workflow (do: workflow). The action: the Executor, one for local and
// remote turns alike (snapshot, workspace, environment, process records,
// adapter, detections, usage, structured output), built from the
// dependencies the daemon hands it rather than from the daemon itself. A
// turn of a thread with a workspace runs in a git worktree of the thread's
// branch (NERVE_WORKDIR); after the adapter answers, its work is committed
// and published (the branch moved, or pushed with a lease), and a failure
// of either is the turn's error of kind workspace. A turn killed or
// cancelled publishes nothing. The Gate holds turns back per adapter: past
// a daily cap a turn fails with kind budget; after three rate-limited
// answers in a row the adapter is paused (30 s, doubling to 30 min) and
// turns wait.
package reflex
