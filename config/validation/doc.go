// Package validation checks an agent's whole setup: nerve.yaml and every
// workflow definition it points at. `nerve validate`, `nerve init` and the
// daemon's hot reload all ask it, so they agree on what is valid.
//
// It sits above config rather than in it: config is nerve.yaml's schema
// and loader and knows nothing of workflow definitions; the checks that
// cross the two (a role's adapter, a reflex's workflow) need config,
// workflow and adapter at once, and belong to no one of them.
package validation
