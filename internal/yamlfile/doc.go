// Package yamlfile reads the YAML files people write (nerve.yaml and
// workflow definitions) strictly: unknown keys and wrong types are errors
// that name the file, line and field, all of them at once. It is a leaf:
// the config loader, the workflow parser and the Khala server use it
// without linking one another.
package yamlfile
