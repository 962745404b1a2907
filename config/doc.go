// Package config is nerve.yaml: its schema, defaults, the NERVE_HOME
// layout, layered loading (defaults, file, environment, flags), validation
// with errors that name file, line and field, and watching for changes.
//
// An adapter instance's section is adapter.Spec, checked by the adapter
// package, which keeps the one table of built-in types. What crosses into
// the workflow definitions nerve.yaml points at (a role's adapter, a
// reflex's workflow) is checked by config/validation.
package config
