// Package deptest keeps the import graph the way DESIGN.md draws it: data
// flows one way (cmd → daemon → sense → reflex → workflow → adapter), the
// Khala server links neither the daemon's config loader nor the adapters,
// the thread engine (khala/engine) speaks no HTTP and links no backend,
// the web console (console/) links neither of its hosts (Khala, the
// daemon), and nothing imports cmd/. Its test reads the graph from `go
// list`, as tailscale's tstest/deptest does, so a wrong import fails
// `make test`.
package deptest
