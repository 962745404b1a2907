// Package sandbox builds the bubblewrap (bwrap) command line that runs one
// turn's agent CLI in a wall of its own (DESIGN.md, Sandbox and
// authorization): the system read-only, the turn's workdir and the CLI's
// state read-write, $HOME an empty tmpfs but for what the owner lists,
// NERVE_HOME absent, a private /tmp, its own pid namespace (nothing it
// starts outlives it), no network of its own unless the owner opens it,
// and an environment nerve built from an allow-list.
//
// It is a leaf: it knows nothing of nerve.yaml or of adapters. The
// executor (package reflex) fills a Spec from the configuration; the
// adapter wraps its command line with Spec.Command; the per-turn services
// (the network proxy, the per-turn socket) add an Extra.
package sandbox
