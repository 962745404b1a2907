// Package daemon is the long-running nerve process of one NERVE_HOME: it
// owns nerve.db, runs local threads through adapters, and serves its
// control API as HTTP/JSON on the unix socket nerve.sock. The CLI is its
// client (Client), as docker is dockerd's. It also starts itself in the
// background for the CLI (Spawn), and, when daemon.metrics_addr is set,
// serves Prometheus /metrics on a loopback address. Each turn reaches it
// through a socket of its own instead (turnsocket.go, NERVE_TURN_SOCKET),
// which serves that turn's rights only.
package daemon
