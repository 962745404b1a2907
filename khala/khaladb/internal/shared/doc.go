// Package shared holds what both Khala storage backends (khalabolt and
// khalapg) keep the same way: the in-memory caches of records that never
// change once written (enrolled agents, messages), which any replica may
// keep and drop without telling the others, and the time encoding of their
// records. Each cache is bounded by MaxThreads entries and starts over
// past it.
package shared
