// Package api holds the JSON shapes of Khala's HTTP API (v1) that both
// its server (khala) and its client (remote) speak, so the two cannot
// drift. It is a leaf: it links neither side.
package api
