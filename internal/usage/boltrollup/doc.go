// Package boltrollup keeps a usage rollup in a bbolt bucket: one row per
// usage.RowKey holding its usage.Totals in binary, added to in the
// transaction that records the answers and read by a filter. The daemon's
// nerve.db (store) and Khala's bbolt backend keep theirs this way.
package boltrollup
