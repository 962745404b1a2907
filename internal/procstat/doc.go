// Package procstat reads what Linux says of a process in /proc/PID/stat:
// its state, parent, start time and CPU time. One parser serves the
// daemon (whose processes they are) and the tests and benchmarks that
// watch processes they started.
package procstat
