// Package reflex holds the rules that turn signals into actions, and the
// action that runs a turn. The rules: a turn claimed by a khala sense is
// run with the named adapter (do: turn), any signal may start a local
// workflow (do: workflow). The action: the Executor, one for local and
// remote turns alike (snapshot, environment, process records, adapter,
// detections, usage, structured output), built from the dependencies the
// daemon hands it rather than from the daemon itself.
package reflex
