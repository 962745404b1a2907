// Package config is nerve.yaml: its schema, defaults, the NERVE_HOME
// layout, layered loading (defaults, file, environment, flags), validation
// with errors that name file, line and field, and watching for changes.
package config
