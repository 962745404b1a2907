// Package prefault makes a nerve process start sooner on Linux: imported
// for its side effect, it maps the executable's writable data in one
// system call as soon as the process starts, where the program's first
// writes would otherwise fault the pages in one at a time.
//
// Every nerve command is a fresh process, and a fresh Go process of this
// size writes to about a hundred pages of its data segment while its
// packages initialise: each a copy-on-write fault of the executable's
// file. On a virtual machine a fault costs tens of microseconds (15–35 µs
// on the test VMs, where `nerve version` takes 24 ms), while populating
// the whole segment (1 MiB) in one madvise(MADV_POPULATE_WRITE) costs a
// fraction of that. The package imports only syscall, so the Go runtime
// initialises it before the packages (os and everything above it) whose
// set-up does most of those writes.
//
// It changes no memory's contents; on kernels before 5.14 (no
// MADV_POPULATE_WRITE) or without /proc it does nothing.
package prefault
