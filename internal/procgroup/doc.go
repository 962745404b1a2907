// Package procgroup starts the processes the daemon runs, each leading a
// process group of its own, so that the daemon's sweep for what escaped a
// turn (daemon/reaper.go) can tell them from escapees: a turn's CLI
// (package adapter) and a helper such as git (package workspace). The
// sweep looks at the daemon's children only while none of these is
// between its fork and its registration (Settled), and spares the groups
// registered as running.
//
// Whatever the daemon starts goes through Start or Run: a child in a
// group of its own that is not registered is taken for an escapee,
// killed, and reaped before os/exec can wait for it.
package procgroup
