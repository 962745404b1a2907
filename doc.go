// Package nerve holds what the binary embeds from the repository's top
// level: the commented example configuration.
package nerve
