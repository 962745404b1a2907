// Package testhome gives each test binary a home of its own: HOME,
// NERVE_HOME and the XDG base directories in a fresh temporary directory,
// removed when the tests end. Every package's TestMain calls Main (or Run),
// so no test reads the user's ~/.nerve, caches or config, whatever nerve
// the developer has used (internal/deptest fails when a package does not).
package testhome
