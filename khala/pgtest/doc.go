// Package pgtest runs throwaway PostgreSQL servers for tests: initdb into a
// temp dir, postgres on a free loopback port, a fresh database per test.
//
// It uses the server binaries of Debian's postgresql package (initdb and
// postgres, found on PATH or in /usr/lib/postgresql/*/bin). PostgreSQL
// refuses to run as root, so as root the cluster runs as an unprivileged
// user (nobody, or NERVE_PG_USER). Tests skip when PostgreSQL is not
// installed, unless NERVE_REQUIRE_POSTGRES=1 (CI), which makes that a
// failure: a suite that silently skipped its database half would pass
// without testing it.
//
// A cluster started here dies with the test binary (a parent-death signal)
// and its directory is removed by a small reaper process after that, so an
// interrupted run leaves nothing behind.
package pgtest
