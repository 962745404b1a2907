// Package usage holds what an agent CLI reports about a turn it ran
// (model, tokens, cost, time), normalised across CLIs, and what is built
// from it: a thread's Totals and its budget Limits, Pricing for CLIs that
// report tokens only, and the rollup (Key, Row, Report) that the local
// store and Khala keep as answers are written. It is a leaf: adapters fill
// it, and the engine, the stores and the Khala client and server carry it.
package usage
