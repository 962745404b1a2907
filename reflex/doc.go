// Package reflex holds the rules that turn signals into actions: a turn
// claimed by a khala sense is run with the named adapter (do: turn), any
// signal may start a local workflow (do: workflow). The daemon supplies
// the actions; this package only decides which to take.
package reflex
