// Package usage holds what an agent CLI reports about a turn it ran
// (model, tokens, cost, time): a leaf type that adapters fill and the
// thread engine, the Khala client and the Khala server carry.
package usage
